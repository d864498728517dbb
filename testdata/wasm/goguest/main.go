// Command goguest is a realistic Go guest for tests: a WASI preview1 command
// built with GOOS=wasip1 GOARCH=wasm (see internal/testwasm.BuildGoGuest).
//
// It reads a JSON object like {"words":["b","a","b"]} from stdin and writes
// one line of JSON to stdout:
//
//	{"total":3,"unique":2,"sorted":["a","b","b"],"counts":{"a":1,"b":2}}
//
// It also writes three diagnostic lines to stderr: its arguments and
// environment as JSON, a summary, then 8 bytes from crypto/rand in hex
// ("goguest: random 0123456789abcdef"; they come from WASI random_get). On input that is not valid
// JSON (or not of that shape) it reports the problem on stderr and exits with
// status 3. If writing the result fails it exits with status 1.
package main

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
)

type request struct {
	Words []string `json:"words"`
}

type response struct {
	Total  int            `json:"total"`
	Unique int            `json:"unique"`
	Sorted []string       `json:"sorted"`
	Counts map[string]int `json:"counts"`
}

func main() {
	if env, err := json.Marshal(map[string][]string{"args": os.Args, "env": os.Environ()}); err == nil {
		fmt.Fprintf(os.Stderr, "goguest: %s\n", env)
	}
	in, err := io.ReadAll(os.Stdin)
	if err != nil {
		fmt.Fprintf(os.Stderr, "goguest: read stdin: %v\n", err)
		os.Exit(1)
	}

	var req request
	if err := json.Unmarshal(in, &req); err != nil {
		fmt.Fprintf(os.Stderr, "goguest: invalid input: %v\n", err)
		os.Exit(3)
	}

	resp := response{
		Total:  len(req.Words),
		Sorted: append([]string{}, req.Words...),
		Counts: make(map[string]int, len(req.Words)),
	}
	sort.Strings(resp.Sorted)
	for _, w := range req.Words {
		resp.Counts[w]++
	}
	resp.Unique = len(resp.Counts)

	out, err := json.Marshal(resp)
	if err != nil {
		fmt.Fprintf(os.Stderr, "goguest: encode result: %v\n", err)
		os.Exit(1)
	}
	if _, err := os.Stdout.Write(append(out, '\n')); err != nil {
		fmt.Fprintf(os.Stderr, "goguest: write result: %v\n", err)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "goguest: sorted %d words (%d unique)\n", resp.Total, resp.Unique)
	var random [8]byte
	_, _ = rand.Read(random[:]) // never fails: crypto/rand panics instead
	fmt.Fprintf(os.Stderr, "goguest: random %s\n", hex.EncodeToString(random[:]))
}
