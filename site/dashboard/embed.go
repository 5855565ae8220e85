// Package dashboard holds the site's live dashboard page: one self-contained
// HTML page with its script and style sheet (no external resources), which
// polls dashboard.json next to it and draws the crawl's state with SVG charts.
package dashboard

import "embed"

// Files are the page's files, at the root of the FS: index.html (served at
// /), app.js (/app.js) and style.css (/style.css).
//
//go:embed index.html app.js style.css
var Files embed.FS
