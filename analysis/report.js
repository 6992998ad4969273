// The report's page script: draws the Plotly figures from the embedded JSON, keeps the time axes
// of all time plots zoomed together, and makes every table sortable (click a header) and
// filterable (the box above it). No network, no other library.
"use strict";
(function () {
  const figures = JSON.parse(document.getElementById("report-figures").textContent);
  const config = {displaylogo: false, responsive: true};
  const timePlots = [];
  let syncing = false;

  // one zoom for every time axis: a relayout on one time plot is applied to the others
  function linkTime(gd) {
    timePlots.push(gd);
    gd.on("plotly_relayout", (ev) => {
      if (syncing) return;
      let update = null;
      for (const axis of ["xaxis", "xaxis2"]) {
        if (ev[axis + ".range[0]"] !== undefined) {
          update = {"xaxis.range": [ev[axis + ".range[0]"], ev[axis + ".range[1]"]]};
        } else if (ev[axis + ".range"]) {
          update = {"xaxis.range": ev[axis + ".range"]};
        } else if (ev[axis + ".autorange"]) {
          update = {"xaxis.autorange": true};
        }
        if (update) break;
      }
      if (!update) return;
      syncing = true;
      Promise.all(timePlots.filter((p) => p !== gd).map((p) => Plotly.relayout(p, update)))
        .finally(() => { syncing = false; });
    });
  }

  async function draw() {
    for (const div of document.querySelectorAll("div.plot")) {
      const fig = figures[div.id];
      await Plotly.newPlot(div, fig.data, fig.layout, config);
      if (div.dataset.time) linkTime(div);
    }
    document.body.dataset.plotted = String(document.querySelectorAll("div.plot").length);
  }

  function cellKey(td, numeric) {
    if (!numeric) return td.textContent.toLowerCase();
    const v = parseFloat(td.dataset.v);
    return Number.isNaN(v) ? -Infinity : v;
  }

  function sortable(table) {
    const body = table.tBodies[0];
    table.querySelectorAll("th").forEach((th, col) => {
      th.addEventListener("click", () => {
        const numeric = th.classList.contains("n");
        const down = th.getAttribute("aria-sort") !== "descending";
        table.querySelectorAll("th").forEach((h) => h.removeAttribute("aria-sort"));
        th.setAttribute("aria-sort", down ? "descending" : "ascending");
        const rows = Array.from(body.rows).map((r) => [cellKey(r.cells[col], numeric), r]);
        rows.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0) * (down ? -1 : 1));
        body.append(...rows.map((r) => r[1]));
      });
    });
  }

  function filterable(box) {
    const table = box.parentElement.querySelector("table");
    const count = box.parentElement.querySelector(".count");
    const rows = Array.from(table.tBodies[0].rows);
    box.addEventListener("input", () => {
      const q = box.value.trim().toLowerCase();
      let shown = 0;
      for (const r of rows) {
        r.hidden = q !== "" && !r.textContent.toLowerCase().includes(q);
        if (!r.hidden) shown += 1;
      }
      count.textContent = q ? `${shown} of ${rows.length} rows` : `${rows.length} rows`;
    });
  }

  document.querySelectorAll("table.data").forEach(sortable);
  document.querySelectorAll("input.filter").forEach(filterable);
  draw();
})();
