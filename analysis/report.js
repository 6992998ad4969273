// The report's page script: draws the Plotly figures from the embedded JSON, keeps the time axes
// of all time plots zoomed together, and makes every table sortable (click a header) and
// filterable (the box above it). No network, no other library.
"use strict";
(function () {
  const figures = JSON.parse(document.getElementById("report-figures").textContent);
  const config = {displaylogo: false, responsive: true};
  const timePlots = [];
  let range = null;   // the range every time plot shows once one was zoomed (null: as built)
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
      range = update["xaxis.range"] || null;
      syncing = true;
      Promise.all(timePlots.filter((p) => p !== gd).map((p) => Plotly.relayout(p, update)))
        .finally(() => { syncing = false; });
    });
  }

  const drawn = new Map();   // plot div -> its newPlot promise
  function draw(div) {
    if (!drawn.has(div)) {
      const fig = figures[div.id];
      if (div.dataset.time && range) fig.layout.xaxis.range = range;
      drawn.set(div, Plotly.newPlot(div, fig.data, fig.layout, config).then(() => {
        if (div.dataset.time) linkTime(div);
      }));
    }
    return drawn.get(div);
  }

  // the plots in view first, the others one at a time after, so the page answers at once
  async function drawAll() {
    const plots = Array.from(document.querySelectorAll("div.plot"));
    const seen = new IntersectionObserver((entries) => {
      for (const e of entries) if (e.isIntersecting) draw(e.target);
    }, {rootMargin: "200px"});
    plots.forEach((div) => seen.observe(div));
    for (const div of plots) {
      await draw(div);
      await new Promise((resolve) => setTimeout(resolve, 0));
    }
    seen.disconnect();
    document.body.dataset.plotted = String(plots.length);
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
  drawAll();
})();
