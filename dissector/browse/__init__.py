"""`kafka-dissect browse`: a terminal browser in Wireshark's three panes (exchange list, field
tree, bytes), built on Textual. Only the visible rows are ever drawn, and a field tree is decoded
when its exchange is selected, so a capture of 100,000 exchanges opens as fast as it dissects."""
