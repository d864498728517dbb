// Command router is an example latent-node HTTP handler in Go for the WAGI
// ABI, built with
//
//	GOOS=wasip1 GOARCH=wasm go build -o router.wasm ./router
//
// The node passes the request in the environment (REQUEST_METHOD,
// PATH_INFO, QUERY_STRING, CONTENT_TYPE, one HTTP_* per request header) and
// the body on stdin; the handler writes a CGI header block (Status,
// Content-Type and headers the node lets through) and the answer's body to
// stdout. Routes, below the node's route (PATH_INFO):
//
//	GET  /            an HTML page naming the routes
//	GET  /hello       {"greeting":"bonjour, Ada",...} for ?name=Ada and
//	                  Accept-Language: fr (en, fr, de, es; default en)
//	POST /echo        the body back, with its Content-Type and X-Body-Bytes
//
// Every answer carries X-Example: go-router. Another path answers 404,
// another method on a known path 405, both as JSON.
//
// reactor.go is the same handler as a reactor's export (see there).
package main

import (
	"encoding/json"
	"fmt"
	"html"
	"io"
	"net/url"
	"os"
	"strings"
)

var salutations = map[string]string{"en": "hello", "fr": "bonjour", "de": "hallo", "es": "hola"}

func main() {
	os.Exit(serve(os.Getenv, os.Stdin, os.Stdout))
}

// answer is one response: status, extra headers and body.
type answer struct {
	status      int
	contentType string
	header      [][2]string
	body        []byte
}

// serve handles the request described by getenv and stdin and writes the
// CGI answer to stdout; it returns the exit status.
func serve(getenv func(string) string, stdin io.Reader, stdout io.Writer) int {
	a := route(getenv, stdin)
	var b strings.Builder
	fmt.Fprintf(&b, "Status: %d\nContent-Type: %s\nX-Example: go-router\n", a.status, a.contentType)
	for _, h := range a.header {
		fmt.Fprintf(&b, "%s: %s\n", h[0], h[1])
	}
	b.WriteString("\n")
	if _, err := io.WriteString(stdout, b.String()); err != nil {
		return 1
	}
	if _, err := stdout.Write(a.body); err != nil {
		return 1
	}
	return 0
}

func route(getenv func(string) string, stdin io.Reader) answer {
	method, path := getenv("REQUEST_METHOD"), getenv("PATH_INFO")
	var allowed string
	switch path {
	case "", "/":
		if method == "GET" {
			return index(getenv)
		}
		allowed = "GET"
	case "/hello":
		if method == "GET" {
			return hello(getenv)
		}
		allowed = "GET"
	case "/echo":
		if method == "POST" {
			return echo(getenv, stdin)
		}
		allowed = "POST"
	default:
		return jsonAnswer(404, map[string]string{"error": "no route " + path})
	}
	return jsonAnswer(405, map[string]string{"error": method + " " + path + ": want " + allowed})
}

func index(getenv func(string) string) answer {
	base := html.EscapeString(getenv("SCRIPT_NAME"))
	page := "<!doctype html>\n<title>router</title>\n<h1>router</h1>\n<ul>\n" +
		"<li><a href=\"" + base + "/hello?name=Ada\">GET " + base + "/hello?name=Ada</a></li>\n" +
		"<li>POST " + base + "/echo</li>\n</ul>\n"
	return answer{status: 200, contentType: "text/html; charset=utf-8", header: [][2]string{{"Cache-Control", "max-age=60"}}, body: []byte(page)}
}

func hello(getenv func(string) string) answer {
	q, err := url.ParseQuery(getenv("QUERY_STRING"))
	if err != nil {
		return jsonAnswer(400, map[string]string{"error": "bad query: " + err.Error()})
	}
	name := strings.TrimSpace(q.Get("name"))
	if name == "" {
		name = "world"
	}
	// The first language of Accept-Language the handler knows, else en.
	lang := "en"
	for _, part := range strings.Split(getenv("HTTP_ACCEPT_LANGUAGE"), ",") {
		tag, _, _ := strings.Cut(strings.TrimSpace(part), ";")
		tag, _, _ = strings.Cut(strings.ToLower(tag), "-")
		if _, ok := salutations[tag]; ok {
			lang = tag
			break
		}
	}
	a := jsonAnswer(200, map[string]string{
		"greeting":   salutations[lang] + ", " + name,
		"path":       getenv("PATH_INFO"),
		"activation": getenv("LATENT_ACTIVATION_ID"),
	})
	a.header = append(a.header, [2]string{"Content-Language", lang}, [2]string{"Vary", "Accept-Language"})
	return a
}

func echo(getenv func(string) string, stdin io.Reader) answer {
	body, err := io.ReadAll(stdin)
	if err != nil {
		return jsonAnswer(500, map[string]string{"error": "read body: " + err.Error()})
	}
	ct := getenv("CONTENT_TYPE")
	if ct == "" {
		ct = "application/octet-stream"
	}
	return answer{status: 200, contentType: ct, header: [][2]string{{"X-Body-Bytes", fmt.Sprint(len(body))}}, body: body}
}

func jsonAnswer(status int, v map[string]string) answer {
	b, _ := json.Marshal(v)
	return answer{status: status, contentType: "application/json", body: append(b, '\n')}
}
