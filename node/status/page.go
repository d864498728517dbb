package status

// The status page's template, the nonce of each answer and the
// Content-Security-Policy that allows nothing else.
//
// The page has no external assets: inline CSS and script carry the
// answer's nonce. Every value goes through html/template (server side) or
// textContent (script side), so tenant names, which operators choose, are
// never markup.

import (
	"crypto/rand"
	_ "embed"
	"encoding/base64"
	"html/template"
)

// csp is the page's policy: its own origin for the data it fetches, the
// inline style and script of this answer only, nothing else.
func csp(nonce string) string {
	return "default-src 'self'; script-src 'nonce-" + nonce + "'; style-src 'nonce-" + nonce + "'; " +
		"img-src 'none'; object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
}

// newNonce returns a fresh nonce for one answer.
func newNonce() string {
	var raw [18]byte
	_, _ = rand.Read(raw[:]) // crypto/rand.Read never fails
	return base64.RawURLEncoding.EncodeToString(raw[:])
}

// page is the status page. The script replaces each table body with the
// rows of /ui/data, through textContent only.
var page = template.Must(template.New("ui").Parse(pageHTML))

// pageHTML is the page's template: an html/template with the answer's
// nonce and the tables.
//
//go:embed page.html
var pageHTML string
