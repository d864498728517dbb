package main

// The invoke command: one invocation of a route, its -H flags and its
// verbose output.

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/cockroachdb/errors"

	"github.com/latent-node/latent-node/client"
	"github.com/latent-node/latent-node/vocab"
)

// headerFlag collects repeated -H 'Name: value' flags.
type headerFlag struct{ h http.Header }

func (f *headerFlag) String() string { return "" }

func (f *headerFlag) Set(s string) error {
	name, value, ok := strings.Cut(s, ":")
	name = strings.TrimSpace(name)
	if !ok || name == "" || strings.ContainsAny(name, " \t") {
		return errors.Newf("want 'Name: value', have %q", s)
	}
	if f.h == nil {
		f.h = http.Header{}
	}
	f.h.Add(name, strings.TrimSpace(value))
	return nil
}

// invoke runs TENANT/SERVICE/ROUTE[/PATH][?QUERY] with the body of -d or
// stdin (none for GET and HEAD without -d) and writes the answer's body to
// stdout; -v writes its status and headers to stderr. An answer of status
// 400 or more (a refusal, a failed activation, or a WAGI guest's own) ends
// with exit code 1.
func invoke(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := newFlags("invoke", stderr, "invoke [flags] TENANT/SERVICE/ROUTE[/PATH][?QUERY] [< input]")
	nodeURL, key, caFile := clientFlags(fs)
	timeout := fs.Duration("timeout", 0, "relative deadline (Latent-Timeout-Ms)")
	priority := fs.Int("priority", -1, "priority (default: the node's 0)")
	routingKey := fs.String("routing-key", "", "routing key for weighted routes")
	fuel := fs.Uint64("fuel", 0, "requested fuel (0: no request)")
	memory := fs.String("memory", "", "requested memory, e.g. 32MiB")
	method := fs.String("X", http.MethodPost, "request method (a WAGI revision takes any, a stdio revision POST only)")
	var headers headerFlag
	fs.Var(&headers, "H", "request header 'Name: value' (repeatable)")
	data := fs.String("d", "", "request body (default: stdin; GET and HEAD send none)")
	verbose := fs.Bool("v", false, "print the answer's status and headers (and a problem's fields) on stderr")
	if code, ok := parse(fs, args); !ok {
		return code
	}
	target, query, _ := strings.Cut(fs.Arg(0), "?")
	parts := strings.SplitN(target, "/", 4)
	if fs.NArg() != 1 || len(parts) < 3 || parts[0] == "" || parts[1] == "" || parts[2] == "" {
		fmt.Fprintln(stderr, "latent-node invoke: want exactly one TENANT/SERVICE/ROUTE[/PATH][?QUERY]")
		return 2
	}
	if *verbose { // ask for a successful activation's stderr tail too
		if headers.h == nil {
			headers.h = http.Header{}
		}
		if headers.h.Get("Latent-Stderr") == "" {
			headers.h.Set("Latent-Stderr", "tail")
		}
	}
	opts := client.InvokeOptions{RoutingKey: *routingKey, Timeout: *timeout, Fuel: *fuel,
		Method: strings.ToUpper(*method), Query: query, Header: headers.h}
	if len(parts) == 4 {
		opts.PathSuffix = parts[3]
	}
	if *priority >= 0 {
		opts.Priority = priority
	}
	if *memory != "" {
		m, err := vocab.ParseByteSize(*memory)
		if err != nil {
			fmt.Fprintln(stderr, "latent-node invoke: --memory:", err)
			return 2
		}
		opts.MemoryBytes = uint64(m)
	}
	c, ok := newClient("invoke", *nodeURL, *key, *caFile, stderr)
	if !ok {
		return 2
	}
	var input []byte
	dataSet := false
	fs.Visit(func(f *flag.Flag) { dataSet = dataSet || f.Name == "d" })
	switch {
	case dataSet:
		input = []byte(*data)
	case opts.Method == http.MethodGet || opts.Method == http.MethodHead:
	default:
		var err error
		input, err = io.ReadAll(io.LimitReader(stdin, 64<<20))
		if err != nil {
			fmt.Fprintln(stderr, "latent-node invoke: read stdin:", err)
			return 1
		}
	}
	res, err := c.Invoke(context.Background(), parts[0], parts[1], parts[2], input, opts)
	if err != nil {
		var p *client.Problem
		if *verbose && errors.As(err, &p) {
			printVerbose(stderr, p.Status, p.Header, p)
		}
		printError(stderr, err)
		return 1
	}
	if *verbose {
		printVerbose(stderr, res.Status, res.Header, nil)
		printOtherHeaders(stderr, res.Header)
		if tail, err := strconv.Unquote(res.Header.Get("Latent-Stderr-Tail")); err == nil && tail != "" {
			fmt.Fprintln(stderr, "stderr tail:")
			for _, line := range strings.Split(strings.TrimSuffix(tail, "\n"), "\n") {
				fmt.Fprintf(stderr, "| %s\n", terminalSafe(line))
			}
		}
	}
	_, _ = stdout.Write(res.Output)
	if res.Status >= http.StatusBadRequest { // a WAGI guest's own answer
		fmt.Fprintf(stderr, "latent-node invoke: the function answered %d %s\n", res.Status, http.StatusText(res.Status))
		return 1
	}
	return 0
}

// printOtherHeaders writes the answer's headers printVerbose leaves out (a
// WAGI guest's Content-Type, Location and own headers, the traceparent),
// sorted, without the transport's Date and Content-Length.
func printOtherHeaders(w io.Writer, h http.Header) {
	keys := make([]string, 0, len(h))
	for k := range h {
		if k != "Date" && k != "Content-Length" && k != "Latent-Stderr-Tail" && !slices.Contains(verboseHeaders, k) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		for _, v := range h[k] {
			fmt.Fprintf(w, "< %s: %s\n", k, terminalSafe(v))
		}
	}
}
