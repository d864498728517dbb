// Command greet is an example latent-node function in Go, built with
//
//	GOOS=wasip1 GOARCH=wasm go build -o greet.wasm .
//
// It reads one JSON object from stdin (the request body), for example
// {"name":"Ada","language":"fr"}, and writes one line of JSON to stdout (the
// answer body of a 200):
//
//	{"greeting":"bonjour, Ada","activation":"<the activation id>"}
//
// "language" is optional (en, fr, de, es; default en). On a body that is not
// such an object it writes the reason to stderr (the node returns stderr's
// tail in the problem) and exits with status 2, which the node reports as
// the outcome declared-error with exit_code 2.
//
// reactor.go is the same function as a reactor's export (see there).
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
)

type request struct {
	Name     string `json:"name"`
	Language string `json:"language"`
}

type response struct {
	Greeting   string `json:"greeting"`
	Activation string `json:"activation"`
}

var salutations = map[string]string{"en": "hello", "fr": "bonjour", "de": "hallo", "es": "hola"}

func main() {
	os.Exit(run(os.Stdin, os.Stdout, os.Stderr, os.Getenv))
}

// run is the function: the request on stdin, the answer on stdout, the
// diagnostics on stderr, the environment through getenv; it returns the exit
// status.
func run(stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) int {
	var req request
	dec := json.NewDecoder(stdin)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		fmt.Fprintf(stderr, "greet: the body must be a JSON object like {\"name\":\"Ada\"}: %v\n", err)
		return 2
	}
	name := strings.TrimSpace(req.Name)
	if name == "" {
		fmt.Fprintln(stderr, "greet: \"name\" is missing or empty")
		return 2
	}
	lang := req.Language
	if lang == "" {
		lang = "en"
	}
	hello, ok := salutations[lang]
	if !ok {
		fmt.Fprintf(stderr, "greet: unknown language %q (want en, fr, de or es)\n", lang)
		return 2
	}
	// The node passes the activation's id in the environment.
	resp := response{Greeting: hello + ", " + name, Activation: getenv("LATENT_ACTIVATION_ID")}
	if err := json.NewEncoder(stdout).Encode(resp); err != nil {
		fmt.Fprintf(stderr, "greet: write answer: %v\n", err)
		return 1
	}
	return 0
}
