package main

// The client commands' common flags, client and error printing, and the
// get, list and delete commands.

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/latent-node/latent-node/client"
	"github.com/latent-node/latent-node/vocab"
)

// keyEnv is the environment variable the client commands read the API key
// from when --key is not given.
const keyEnv = "LATENT_KEY"

// caFileEnv is the environment variable the client commands read the CA
// file from when --ca-file is not given.
const caFileEnv = "LATENT_CA_FILE"

func clientFlags(fs *flag.FlagSet) (nodeURL, key, caFile *string) {
	nodeURL = fs.String("node", "http://127.0.0.1:8080", "node URL")
	key = fs.String("key", "", "API key (default $"+keyEnv+")")
	caFile = fs.String("ca-file", "", "PEM file of the CA that signs the node's certificate, for an https --node (default $"+caFileEnv+"; without either, the system's roots)")
	return nodeURL, key, caFile
}

// newClient returns the client of command cmd, or prints why not: a
// missing key names the flag and the environment variable that give one.
func newClient(cmd, nodeURL, key, caFile string, stderr io.Writer) (*client.Client, bool) {
	if key == "" {
		key = os.Getenv(keyEnv)
	}
	if key == "" {
		fmt.Fprintf(stderr, "latent-node %s: no API key: pass --key KEY or set %s (latent-node keygen makes one)\n", cmd, keyEnv)
		return nil, false
	}
	if caFile == "" {
		caFile = os.Getenv(caFileEnv)
	}
	var opts []client.Option
	if caFile != "" {
		opts = append(opts, client.WithCAFile(caFile))
	}
	c, err := client.New(nodeURL, key, opts...)
	if err != nil {
		fmt.Fprintf(stderr, "latent-node %s: %v\n", cmd, err)
		return nil, false
	}
	return c, true
}

// printError prints a failed call; a refused key gets a hint where the key
// came from.
func printError(stderr io.Writer, err error) {
	for _, line := range strings.Split(err.Error(), "\n") {
		fmt.Fprintln(stderr, terminalSafe(line))
	}
	var p *client.Problem
	if errors.As(err, &p) && p.Status == http.StatusUnauthorized {
		fmt.Fprintf(stderr, "the node does not know this API key: check --key or %s\n", keyEnv)
	}
	if hint := tlsHint(err); hint != "" {
		fmt.Fprintln(stderr, hint)
	}
}

// tlsHint explains a refused node certificate, or returns "".
func tlsHint(err error) string {
	var invalid x509.CertificateInvalidError
	var host x509.HostnameError
	var unknown x509.UnknownAuthorityError
	switch {
	case errors.As(err, &invalid) && invalid.Reason == x509.Expired:
		c := invalid.Cert
		return fmt.Sprintf("the node's TLS certificate has expired or is not yet valid (valid from %s until %s): the node must be given a current certificate",
			c.NotBefore.UTC().Format(time.RFC3339), c.NotAfter.UTC().Format(time.RFC3339))
	case errors.As(err, &host):
		names := append([]string{}, host.Certificate.DNSNames...)
		for _, ip := range host.Certificate.IPAddresses {
			names = append(names, ip.String())
		}
		return fmt.Sprintf("the node's TLS certificate is not valid for %q (it names %s): check --node, or give the node a certificate for that name",
			host.Host, strings.Join(names, ", "))
	case errors.As(err, &unknown):
		return "the node's TLS certificate is not signed by a trusted CA: pass --ca-file (or set " + caFileEnv + ") to the CA that signs it"
	}
	return ""
}

// serviceArg splits a TENANT/SERVICE argument.
func serviceArg(fs *flag.FlagSet, cmd string, stderr io.Writer) (tenant, service string, ok bool) {
	parts := strings.Split(fs.Arg(0), "/")
	if fs.NArg() != 1 || len(parts) != 2 || parts[0] == "" || parts[1] == "" {
		fmt.Fprintf(stderr, "latent-node %s: want exactly one TENANT/SERVICE\n", cmd)
		return "", "", false
	}
	return parts[0], parts[1], true
}

// get prints the active release of a service:
//
//	demo/hello release rel1-… generation 3
//	revisions:
//	  v1 rev1-…
//	routes:
//	  greet -> v1 weight 1
func get(args []string, stdout, stderr io.Writer) int {
	c, tenant, service, code, ok := serviceCommand("get", args, stderr)
	if !ok {
		return code
	}
	d, err := c.GetDeployment(context.Background(), tenant, service)
	if err != nil {
		printError(stderr, err)
		return 1
	}
	fmt.Fprintf(stdout, "%s/%s release %s generation %d\n", tenant, service, d.Release, d.Generation)
	fmt.Fprintln(stdout, "revisions:")
	for _, r := range d.Revisions {
		fmt.Fprintf(stdout, "  %s %s\n", r.Name, r.ID)
	}
	fmt.Fprintln(stdout, "routes:")
	for _, r := range d.Routes {
		name := r.Name
		if r.Function != "" {
			name += " (function " + r.Function + ")"
		}
		targets := make([]string, len(r.Targets))
		for i, t := range r.Targets {
			targets[i] = fmt.Sprintf("%s weight %d", t.Revision, t.Weight)
		}
		fmt.Fprintf(stdout, "  %s -> %s\n", name, strings.Join(targets, ", "))
	}
	return 0
}

// list prints the services of the caller's tenant (read from the key's
// admission view unless given), one a line under a header:
//
//	SERVICE  GENERATION  REVISIONS
//	hello    3           v1=rev1-…
func list(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("list", stderr, "list [flags] [TENANT]")
	nodeURL, key, caFile := clientFlags(fs)
	if code, ok := parse(fs, args); !ok {
		return code
	}
	if fs.NArg() > 1 {
		fmt.Fprintln(stderr, "latent-node list: want at most one TENANT")
		return 2
	}
	c, ok := newClient("list", *nodeURL, *key, *caFile, stderr)
	if !ok {
		return 2
	}
	ctx := context.Background()
	tenant := fs.Arg(0)
	if tenant == "" {
		raw, err := c.Admission(ctx)
		if err != nil {
			printError(stderr, err)
			return 1
		}
		var own struct {
			Name string `json:"name"`
		}
		if err := json.Unmarshal(raw, &own); err != nil || own.Name == "" {
			fmt.Fprintln(stderr, "latent-node list: the node did not name the key's tenant; give TENANT")
			return 1
		}
		tenant = own.Name
	}
	l, err := c.ListDeployments(ctx, tenant)
	if err != nil {
		printError(stderr, err)
		return 1
	}
	if len(l.Services) == 0 {
		fmt.Fprintf(stdout, "tenant %s has no deployed services\n", l.Tenant)
		return 0
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SERVICE\tGENERATION\tREVISIONS")
	for _, d := range l.Services {
		revs := make([]string, len(d.Revisions))
		for i, r := range d.Revisions {
			revs[i] = r.Name + "=" + r.ID
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\n", d.Name, d.Generation, strings.Join(revs, " "))
	}
	_ = tw.Flush()
	return 0
}

// del deletes a service's release and prints the catalog generation of the
// deletion: "deleted demo/hello at generation 5".
func del(args []string, stdout, stderr io.Writer) int {
	c, tenant, service, code, ok := serviceCommand("delete", args, stderr)
	if !ok {
		return code
	}
	gen, err := c.DeleteDeployment(context.Background(), tenant, service)
	if err != nil {
		printError(stderr, err)
		return 1
	}
	fmt.Fprintf(stdout, "deleted %s/%s at generation %d\n", tenant, service, gen)
	return 0
}

// verboseHeaders are the answer headers invoke -v prints, in this order.
var verboseHeaders = []string{"Latent-Activation-Id", "Latent-Revision", "Latent-Outcome", "Latent-Fuel-Used",
	"Latent-Memory-Peak-Bytes", "Latent-Queue-Wait-Ms", "Latent-Execution-Ms", "Server-Timing", "Latent-Cell-Class",
	"Retry-After"}

// printVerbose writes an invocation's status line and the headers that
// matter, then, for a problem, its fields and stderr tail:
//
//	< 502 Bad Gateway
//	< Latent-Outcome: declared-error
//	problem: code=… reason=… outcome=declared-error exit_code=3
//	stderr tail:
//	| complaint: bad input
//
// Header values, the problem's title and detail and each line of the
// stderr tail are printed through terminalSafe: a guest writes no escape
// sequences to the terminal of whoever runs invoke -v.
func printVerbose(w io.Writer, status int, h http.Header, p *client.Problem) {
	fmt.Fprintf(w, "< %d %s\n", status, http.StatusText(status))
	for _, k := range verboseHeaders {
		if v := h.Get(k); v != "" {
			fmt.Fprintf(w, "< %s: %s\n", k, terminalSafe(v))
		}
	}
	if p == nil {
		return
	}
	var fields []string
	for _, f := range []struct{ k, v string }{{"code", p.Code}, {"reason", p.Reason}, {"scope", p.Scope},
		{"dimension", p.Dimension}, {"outcome", p.Outcome}, {"trap_kind", p.TrapKind}} {
		if f.v != "" {
			fields = append(fields, f.k+"="+f.v)
		}
	}
	if p.ExitCode != nil {
		fields = append(fields, fmt.Sprintf("exit_code=%d", *p.ExitCode))
	}
	fields = append(fields, fmt.Sprintf("retryable=%t", p.Retryable))
	fmt.Fprintf(w, "problem: %s\n", strings.Join(fields, " "))
	if p.Title != "" {
		fmt.Fprintf(w, "title: %s\n", terminalSafe(p.Title))
	}
	if p.Detail != "" {
		fmt.Fprintf(w, "detail: %s\n", terminalSafe(p.Detail))
	}
	if p.Stderr != "" {
		fmt.Fprintln(w, "stderr tail:")
		for _, line := range strings.Split(strings.TrimSuffix(p.Stderr, "\n"), "\n") {
			fmt.Fprintf(w, "| %s\n", terminalSafe(line))
		}
	}
}

// serviceCommand parses the flags and the TENANT/SERVICE argument of a
// command about one service and makes its client; !ok means the command
// ends with code.
func serviceCommand(name string, args []string, stderr io.Writer) (c *client.Client, tenant, service string, code int, ok bool) {
	fs := newFlags(name, stderr, name+" [flags] TENANT/SERVICE")
	nodeURL, key, caFile := clientFlags(fs)
	if code, ok := parse(fs, args); !ok {
		return nil, "", "", code, false
	}
	if tenant, service, ok = serviceArg(fs, name, stderr); !ok {
		return nil, "", "", 2, false
	}
	if c, ok = newClient(name, *nodeURL, *key, *caFile, stderr); !ok {
		return nil, "", "", 2, false
	}
	return c, tenant, service, 0, true
}

// deployProgressEvery is how often deploy says it is still waiting.
const deployProgressEvery = 3 * time.Second

// deployReporting is c.Deploy of m, saying on stderr every interval that
// the node is still compiling and preparing the release: a large module
// (a JavaScript engine compiles for 10 s and more on two cores) then does
// not look hung. The request runs on a goroutine this function waits for.
func deployReporting(c *client.Client, m vocab.Manifest, stderr io.Writer, every time.Duration) (*client.Deployment, error) {
	type result struct {
		d   *client.Deployment
		err error
	}
	done := make(chan result, 1)
	go func() {
		d, err := c.Deploy(context.Background(), string(m.Tenant), string(m.Service), m)
		done <- result{d, err}
	}()
	start := time.Now()
	tick := time.NewTicker(every)
	defer tick.Stop()
	waited := false
	for {
		select {
		case r := <-done:
			if waited {
				fmt.Fprintf(stderr, "deploy: answered after %.0f s\n", time.Since(start).Seconds())
			}
			return r.d, r.err
		case <-tick.C:
			waited = true
			fmt.Fprintf(stderr, "deploy: the node is compiling and preparing %s/%s (%d revisions), %.0f s so far\n",
				m.Tenant, m.Service, len(m.Revisions), time.Since(start).Seconds())
		}
	}
}
