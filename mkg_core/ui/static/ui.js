/* The memory viewer's own script: live timelines (server-sent events) and the graph drawing.
 * Loaded from the viewer's origin only (the Content-Security-Policy allows nothing else); rows come
 * from the server already escaped by its templates. */
(function () {
  "use strict";

  function setState(text) {
    document.querySelectorAll("[data-live-state]").forEach(function (node) {
      node.textContent = text;
    });
  }

  function live(list) {
    var url = list.getAttribute("data-live");
    if (!url || url.charAt(0) !== "/" || url.charAt(1) === "/") {
      return;
    }
    var source = new EventSource(url);
    var received = 0;
    source.addEventListener("open", function () {
      setState("live: new events appear below");
    });
    source.addEventListener("row", function (message) {
      var holder = document.createElement("template");
      holder.innerHTML = message.data;
      list.appendChild(holder.content);
      received += 1;
      list.setAttribute("data-live-received", String(received));
      setState("live: " + received + " new event" + (received === 1 ? "" : "s"));
    });
    source.addEventListener("error", function () {
      if (source.readyState === EventSource.CLOSED) {
        setState("disconnected: reload the page");
      } else {
        setState("reconnecting…");
      }
    });
    window.addEventListener("pagehide", function () {
      source.close();
    });
  }

  var STATUS_COLOURS = { approved: "#2f855a", candidate: "#b7791f", rejected: "#9b2c2c" };

  function draw(box) {
    var url = box.getAttribute("data-graph");
    if (!window.cytoscape || !url || url.charAt(0) !== "/" || url.charAt(1) === "/") {
      return;
    }
    fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (response) {
        if (!response.ok) {
          throw new Error("the graph could not be loaded (" + response.status + ")");
        }
        return response.json();
      })
      .then(function (data) {
        var graph = window.cytoscape({
          container: box,
          elements: data.elements,
          wheelSensitivity: 0.3,
          minZoom: 0.2,
          maxZoom: 1.3,
          style: [
            {
              selector: "node",
              style: {
                label: "data(caption)",
                "font-size": 10,
                "text-wrap": "ellipsis",
                "text-max-width": 160,
                "text-valign": "bottom",
                "text-margin-y": 4,
                color: "#2d3748",
                "background-color": "#718096",
                width: 18,
                height: 18
              }
            },
            { selector: "node[label = 'Learning']", style: { "background-color": "#3182ce", shape: "round-rectangle" } },
            { selector: "node[label = 'Session']", style: { "background-color": "#805ad5" } },
            { selector: "node[label = 'SessionEvent']", style: { "background-color": "#a0aec0", width: 12, height: 12 } },
            { selector: "node[label = 'Project']", style: { "background-color": "#dd6b20", shape: "hexagon", width: 26, height: 26 } },
            { selector: "node[label = 'Entity']", style: { "background-color": "#38a169", shape: "diamond" } },
            { selector: "node[?centre]", style: { width: 30, height: 30, "border-width": 3, "border-color": "#1a202c" } },
            {
              selector: "edge",
              style: {
                width: 1.2,
                label: "data(label)",
                "font-size": 7,
                color: "#718096",
                "text-rotation": "autorotate",
                "text-background-color": "#fbfcfd",
                "text-background-opacity": 1,
                "line-color": "#cbd5e0",
                "target-arrow-color": "#cbd5e0",
                "target-arrow-shape": "triangle",
                "curve-style": "bezier"
              }
            }
          ],
          layout: {
            name: "cose",
            animate: false,
            padding: 40,
            idealEdgeLength: 110,
            nodeRepulsion: 400000,
            nodeOverlap: 20
          }
        });
        graph.nodes().forEach(function (node) {
          var colour = STATUS_COLOURS[node.data("status")];
          if (colour && node.data("label") === "Learning") {
            node.style("background-color", colour);
          }
        });
        graph.on("tap", "node", function (event) {
          var target = event.target.data("href");
          if (typeof target === "string" && target.charAt(0) === "/" && target.charAt(1) !== "/") {
            window.location.assign(target);
          }
        });
        box.setAttribute("data-drawn", String(graph.nodes().length));
      })
      .catch(function (problem) {
        box.textContent = String(problem.message || problem);
      });
  }

  function start() {
    document.querySelectorAll("[data-live]").forEach(live);
    document.querySelectorAll("[data-graph]").forEach(draw);
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
