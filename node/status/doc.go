// Package status serves the node's read-only views of its own state: the
// status page for administrators (GET /ui, a static page whose script
// and style are embedded and served without credentials, and GET
// /ui/data and /ui/history, the JSON it polls with the admin key) and the
// admission views (GET /v1/admission, a tenant's; GET /v1/admin/admission,
// the node's). Each answer reads admission, the ingress pools, the cell
// pool, the scheduler, the catalog, the load sample, the runner's warm
// instances and the refusal counter once; nothing here changes state.
//
// The node makes the Views (node.New) and routes to their handlers behind
// authentication, the admin role where a route needs it and the ingress
// governor, and nothing else imports it. Of the module this package
// imports only admission, catalog, cellpool, loadsource, runner, node/history,
// scheduler, refusal, vocab, node/api, node/auth and node/front (the
// import rule checks it).
//
// # Internal organization
//
//   - views.go: Config and Views, the handlers of the four routes, and
//     Snapshot, the page's tables and the admin admission document read at
//     one moment.
//   - page.go, page.html, app.js, app.css: the page, its script (sign-in,
//     tables, SVG plots of the history) and style, and the
//     Content-Security-Policy that allows only them.
//   - instances.go: Instances, the runner's warm instances as the views
//     show them.
package status
