"""Live capture: sniff an interface and dissect Kafka traffic as it happens (`kafka-dissect live`).

sniffer.py  the AF_PACKET socket (scapy's Linux socket) with a kernel filter from bpf.py
runner.py   the loop: packets -> pcapng file and Dissector -> exchanges, expiry, final summary
rolling.py  per-api rates, latency percentiles and errors (window and whole run)
view.py     the rolling view on a terminal, periodic stats elsewhere
stop.py     Ctrl-C, SIGTERM, --duration and --count
"""
