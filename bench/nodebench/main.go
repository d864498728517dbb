// Command nodebench is `make bench-node`: a load generator that builds and
// starts the real latent-node binary and measures how well the node
// isolates tenants and what its HTTP path costs. A single closed-loop quiet
// client runs alone (solo), then next to 1, 4, 16, 64 closed-loop noisy
// clients, then next to 16 noisy clients hammering a route that is refused
// (they ignore Retry-After). An open-loop quiet tenant sends at 10 % of the
// node's saturated goodput, alone and next to 16 noisy clients. Four equal
// tenants flood the node (Jain's fairness index of their rates). Finally
// closed-loop clients flood the echo guest on the node, on a bare
// net/http + wazero server and on a bare net/http server without wasm
// (both are this program in its -serve-bare mode), and closed-loop clients
// ask the Go example's WAGI router (examples/go/router) for a greeting,
// deployed as a fresh command and as a snapshot reactor. The compute guest's N
// is chosen so that one activation executes in about -target-exec. Rounds
// interleave the scenarios; figures are medians over rounds. Results go to
// bench/results/node.json and tables on stdout. See README.md in this
// directory.
//
// The node (and each baseline server) is pinned to one CPU and the
// generator to the others (taskset; the generator re-executes itself under
// taskset), so the generator does not steal the server's CPU.
//
// It is a main package: `go vet ./...` compiles it, no test runs it.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/latent-node/latent-node/bench/internal/nodeproc"
)

// Environment variables of the re-executed, pinned generator.
const (
	envNodeCPU  = "LATENT_NODEBENCH_NODE_CPU"  // the node's CPU list; set: already pinned
	envBuiltDir = "LATENT_NODEBENCH_BUILT_DIR" // a temporary build directory to remove at the end
)

type options struct {
	duration   time.Duration
	warmup     time.Duration
	rounds     int
	noisy      []int
	hammer     int
	pin        bool
	bin        string
	out        string
	targetExec time.Duration
	computeN   uint64
	svg        string

	openLoad    float64 // fraction of capacity; 0 skips the open-loop scenarios
	openNoisy   int
	openConns   int
	jainTenants int // 0 skips the Jain scenario
	jainClients int
	flood       int // 0 skips the flood scenarios
	floodBody   int
	floodGuests []string
	floodRepeat int           // measurements of each flood server per round
	floodDur    time.Duration // each one's length

	router        bool // the router scenario: the Go example router, fresh and snapshot
	routerClients int
}

func main() {
	var o options
	var noisy string
	flag.DurationVar(&o.duration, "duration", 5*time.Second, "measured duration of each scenario per round")
	flag.DurationVar(&o.warmup, "warmup", time.Second, "warm-up of each scenario before measuring")
	flag.IntVar(&o.rounds, "rounds", 5, "rounds; the scenarios interleave and figures are medians over rounds")
	flag.StringVar(&noisy, "noisy", "1,4,16,64", "noisy closed-loop client counts, one scenario each")
	flag.IntVar(&o.hammer, "hammer", 16, "connections of the ignore-Retry-After scenario (0: skip it)")
	flag.BoolVar(&o.pin, "pin", true, "pin the node to one CPU and the generator to the others (taskset)")
	flag.StringVar(&o.bin, "bin", "", "latent-node binary; empty: go build ./cmd/latent-node into a temporary directory")
	flag.StringVar(&o.out, "out", "bench/results/node.json", "where to write the results (relative: to the module root)")
	flag.DurationVar(&o.targetExec, "target-exec", 300*time.Microsecond, "execution time of one activation the compute N is calibrated to")
	flag.Uint64Var(&o.computeN, "compute-n", 0, "compute guest input N; 0: calibrate to -target-exec")
	plot := flag.String("plot", "", "only render the SVG plot of this results file (to -svg) and exit")
	flag.StringVar(&o.svg, "svg", "bench/results/node.svg", "where to write the latency plot (empty: none)")
	flag.Float64Var(&o.openLoad, "open-load", 0.1, "open-loop quiet arrival rate as a fraction of the round's capacity (0: skip the open-loop scenarios)")
	flag.IntVar(&o.openNoisy, "open-noisy", 16, "closed-loop noisy clients next to the open-loop quiet tenant")
	flag.IntVar(&o.openConns, "open-conns", 64, "keep-alive connections the open-loop sender may use")
	flag.IntVar(&o.jainTenants, "jain-tenants", 4, "equal flooding tenants of the Jain scenario (0: skip it)")
	flag.IntVar(&o.jainClients, "jain-clients", 8, "closed-loop clients of each Jain tenant")
	flag.IntVar(&o.flood, "flood", 16, "closed-loop clients of the flood scenarios (node vs bare wazero vs no wasm; 0: skip them)")
	flag.IntVar(&o.floodBody, "flood-body", 64, "request body bytes of the echo flood")
	flag.IntVar(&o.floodRepeat, "flood-repeat", 2, "measurements of each flood server per round, the servers taking turns (the node/bare ratio is judged per turn)")
	flag.DurationVar(&o.floodDur, "flood-duration", 2*time.Second, "measured duration of each flood measurement")
	flag.BoolVar(&o.router, "router", true, "the router scenario: the Go example's WAGI router as a fresh command and as a snapshot reactor (skipped when the Go toolchain cannot build it)")
	flag.IntVar(&o.routerClients, "router-clients", 8, "closed-loop keep-alive clients of the router scenario")
	floodG := flag.String("flood-guests", "echo", "guests of the flood scenarios, comma-separated: echo, compute")
	serveMode := flag.String("serve-bare", "", "internal: serve a baseline (wazero or nowasm) instead of benchmarking")
	listen := flag.String("listen", "127.0.0.1:0", "internal: the -serve-bare listen address")
	flag.Parse()
	if *serveMode != "" {
		if err := serveBare(*serveMode, *listen); err != nil {
			fmt.Fprintf(os.Stderr, "nodebench: %+v\n", err)
			os.Exit(1)
		}
		return
	}
	for _, g := range strings.Split(*floodG, ",") {
		if g = strings.TrimSpace(g); g == "" {
			continue
		}
		if !slices.Contains(floodGuests, g) {
			fmt.Fprintf(os.Stderr, "nodebench: -flood-guests %q: want some of %v\n", *floodG, floodGuests)
			os.Exit(2)
		}
		o.floodGuests = append(o.floodGuests, g)
	}
	if *plot != "" {
		if err := plotFromJSON(*plot, o.svg); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	for _, f := range strings.Split(noisy, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		k, err := strconv.Atoi(f)
		if err != nil || k < 1 {
			fmt.Fprintf(os.Stderr, "nodebench: -noisy %q: want positive integers\n", noisy)
			os.Exit(2)
		}
		o.noisy = append(o.noisy, k)
	}
	if o.rounds < 1 || o.duration <= 0 || o.warmup < 0 {
		fmt.Fprintln(os.Stderr, "nodebench: -rounds must be ≥ 1 and -duration > 0")
		os.Exit(2)
	}
	if o.openLoad < 0 || o.openLoad > 1 || o.openNoisy < 0 || o.openConns < 1 || o.jainTenants < 0 || o.jainClients < 1 ||
		o.flood < 0 || o.floodBody < 0 || o.floodBody > maxBareBody || o.floodRepeat < 1 || o.floodDur <= 0 || o.routerClients < 1 {
		fmt.Fprintln(os.Stderr, "nodebench: want 0 ≤ -open-load ≤ 1, -open-conns ≥ 1, -jain-clients ≥ 1, 0 ≤ -flood-body ≤ 64KiB, -flood-repeat ≥ 1, -flood-duration > 0, -router-clients ≥ 1, no negative counts")
		os.Exit(2)
	}
	if err := run(context.Background(), o); err != nil {
		fmt.Fprintf(os.Stderr, "nodebench: %+v\n", err)
		os.Exit(1)
	}
}

// allowedCPUs reads this process's CPU affinity list from /proc.
func allowedCPUs() []int {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return nil
	}
	for _, l := range strings.Split(string(data), "\n") {
		v, ok := strings.CutPrefix(l, "Cpus_allowed_list:")
		if !ok {
			continue
		}
		var cpus []int
		for _, r := range strings.Split(strings.TrimSpace(v), ",") {
			lo, hi, isRange := strings.Cut(r, "-")
			a, err := strconv.Atoi(lo)
			if err != nil {
				return nil
			}
			b := a
			if isRange {
				if b, err = strconv.Atoi(hi); err != nil {
					return nil
				}
			}
			for c := a; c <= b; c++ {
				cpus = append(cpus, c)
			}
		}
		return cpus
	}
	return nil
}

func cpuList(cpus []int) string {
	s := make([]string, len(cpus))
	for i, c := range cpus {
		s[i] = strconv.Itoa(c)
	}
	return strings.Join(s, ",")
}

// repin re-executes this program under taskset on every allowed CPU but the
// first, which it leaves to the node. It returns only if it does not
// re-execute (pinning off, unavailable, or already done).
func repin(ctx context.Context, o options) error {
	if !o.pin || os.Getenv(envNodeCPU) != "" {
		return nil
	}
	taskset, err := exec.LookPath("taskset")
	cpus := allowedCPUs()
	if err != nil || len(cpus) < 2 {
		fmt.Fprintf(os.Stderr, "nodebench: not pinning (taskset found: %v, CPUs: %d)\n", err == nil, len(cpus))
		return nil
	}
	self, err := os.Executable()
	if err != nil {
		return errors.Wrap(err, "nodebench: own executable")
	}
	args := []string{"taskset", "-c", cpuList(cpus[1:]), self}
	env := append(os.Environ(), envNodeCPU+"="+strconv.Itoa(cpus[0]))
	if o.bin == "" {
		// Build before pinning: the build may use every CPU.
		dir, bin, err := nodeproc.Build(ctx)
		if err != nil {
			return err
		}
		args = append(args, "-bin", bin)
		env = append(env, envBuiltDir+"="+dir)
	}
	args = append(args, os.Args[1:]...)
	return errors.Wrap(syscall.Exec(taskset, args, env), "nodebench: re-exec under taskset")
}

// scenario is one load mix.
type scenario struct {
	Name   string `json:"name"`
	Noisy  int    `json:"noisy_clients"`
	Hammer int    `json:"hammer_clients"`
}

// roundResult is one scenario's figures in one round.
type roundResult struct {
	QuietP50Ms    float64                   `json:"quiet_p50_ms"`
	QuietP99Ms    float64                   `json:"quiet_p99_ms"`
	QuietRPS      float64                   `json:"quiet_rps"`
	QuietRefusals float64                   `json:"quiet_refusals"`
	QuietErrors   float64                   `json:"quiet_errors"`
	QuietFrontP50 float64                   `json:"quiet_server_front_p50_ms"`
	QuietQueueP50 float64                   `json:"quiet_server_queue_p50_ms"`
	QuietQueueP99 float64                   `json:"quiet_server_queue_p99_ms"`
	QuietExecP50  float64                   `json:"quiet_server_exec_p50_ms"`
	QuietBackP50  float64                   `json:"quiet_server_back_p50_ms"`
	QuietOutside  float64                   `json:"quiet_outside_handler_p50_ms"`
	NodeCPU       float64                   `json:"node_cpu_utilization"`
	GenCPU        float64                   `json:"generator_cpu_utilization"`
	OthersCPU     float64                   `json:"others_on_node_cpu"`
	NoisyRPS      float64                   `json:"noisy_rps"`
	NoisyRefusals float64                   `json:"noisy_refusals"`
	NoisyErrors   float64                   `json:"noisy_errors"`
	HammerRPS     float64                   `json:"hammer_answers_per_s"`
	HammerErrors  float64                   `json:"hammer_errors"`
	GoodputRPS    float64                   `json:"goodput_rps"`
	Statuses      map[string]map[string]int `json:"statuses,omitempty"`
}

type scenarioResult struct {
	scenario
	Rounds              []roundResult `json:"rounds"`
	Median              roundResult   `json:"median"`
	QuietRPSRatioVsSolo float64       `json:"quiet_rps_ratio_vs_solo"`
	QuietP50RatioVsSolo float64       `json:"quiet_p50_ratio_vs_solo"`
	QuietP99RatioVsSolo float64       `json:"quiet_p99_ratio_vs_solo"`
}

type calibration struct {
	ComputeN        uint64  `json:"compute_n"`
	TargetExecMs    float64 `json:"target_exec_ms"`
	ExecMsAtN1      float64 `json:"exec_ms_at_n1,omitempty"`
	ExecMsAtProbe   float64 `json:"exec_ms_at_probe,omitempty"`
	ProbeN          uint64  `json:"probe_n,omitempty"`
	ActivationExec  float64 `json:"activation_exec_ms"`         // median Server-Timing exec at ComputeN
	SoloLatencyP50  float64 `json:"solo_request_latency_ms"`    // median end-to-end of the same requests
	CalibrationRuns int     `json:"calibration_runs_per_point"` //
}

type results struct {
	Date        string            `json:"date"`
	Machine     map[string]any    `json:"machine"`
	Settings    map[string]any    `json:"settings"`
	Calibration calibration       `json:"calibration"`
	Scenarios   []scenarioResult  `json:"scenarios"`
	Summary     map[string]any    `json:"summary"`
	Notes       []string          `json:"notes"`
	Pinning     map[string]string `json:"pinning"`
	OpenLoop    *openSection      `json:"open_loop,omitempty"`
	Jain        *jainSection      `json:"jain,omitempty"`
	Flood       []floodSection    `json:"flood,omitempty"`
	Router      *routerSection    `json:"router,omitempty"`
}

// hostCPUs counts the host's processors in /proc/cpuinfo (runtime.NumCPU
// counts only the CPUs this process may use).
func hostCPUs() int {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return runtime.NumCPU()
	}
	n := 0
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "processor") {
			n++
		}
	}
	return max(n, 1)
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	return strings.Join(strings.Fields(string(b))[:3], " ")
}

func run(ctx context.Context, o options) error {
	if err := repin(ctx, o); err != nil {
		return err
	}
	if dir := os.Getenv(envBuiltDir); dir != "" {
		defer func() { _ = os.RemoveAll(dir) }()
	}
	nodeCPU := os.Getenv(envNodeCPU)
	pinnedCPU := -1 // the node's one CPU, when pinned
	if c, err := strconv.Atoi(nodeCPU); err == nil {
		pinnedCPU = c
	}
	if o.bin == "" {
		dir, bin, err := nodeproc.Build(ctx)
		if err != nil {
			return err
		}
		defer func() { _ = os.RemoveAll(dir) }()
		o.bin = bin
	}
	root, err := nodeproc.ModuleRoot()
	if err != nil {
		return err
	}
	guests := map[string][]byte{}
	for _, g := range append([]string{"compute"}, o.floodGuests...) {
		if guests[g], err = os.ReadFile(filepath.Join(root, "testdata", "wasm", g+".wasm")); err != nil {
			return errors.Wrapf(err, "nodebench: %s guest", g)
		}
	}
	// quiet, noisy, then the Jain scenario's equal tenants.
	tenants := []string{"quiet", "noisy"}
	for i := range o.jainTenants {
		tenants = append(tenants, "jain"+strconv.Itoa(i+1))
	}
	keys := map[string]string{}
	var cfgTenants []tenantConfig
	for _, t := range tenants {
		key, hash, err := nodeproc.Keygen(ctx, o.bin)
		if err != nil {
			return err
		}
		keys[t] = key
		cfgTenants = append(cfgTenants, tenantConfig{name: t, keyHash: hash})
	}
	quietKey, noisyKey := keys["quiet"], keys["noisy"]
	allKeys := make([]string, len(tenants))
	for i, t := range tenants {
		allKeys[i] = keys[t]
	}
	// The router scenario's examples and tenant (not one of tenants: those
	// after quiet and noisy are the Jain scenario's).
	var router *routerSection
	var routerDir string
	if o.router {
		dir, reason, err := buildRouter(ctx)
		if err != nil {
			return err
		}
		if reason != "" {
			fmt.Fprintf(os.Stderr, "nodebench: router scenario skipped: %s\n", reason)
			router = &routerSection{Skipped: reason}
		} else {
			defer func() { _ = os.RemoveAll(dir) }()
			routerDir = dir
			key, hash, err := nodeproc.Keygen(ctx, o.bin)
			if err != nil {
				return err
			}
			keys[routerTenant] = key
			cfgTenants = append(cfgTenants, tenantConfig{name: routerTenant, keyHash: hash})
			allKeys = append(allKeys, key)
		}
	}
	dataDir, err := os.MkdirTemp("", "nodebench-data-")
	if err != nil {
		return errors.Wrap(err, "nodebench: data dir")
	}
	defer func() { _ = os.RemoveAll(dataDir) }()
	cfgPath := filepath.Join(dataDir, "node.toml")
	if err := os.WriteFile(cfgPath, []byte(configTOML(filepath.Join(dataDir, "data"), cfgTenants)), 0o600); err != nil {
		return errors.Wrap(err, "nodebench: config")
	}
	n, err := nodeproc.Start(ctx, o.bin, cfgPath, nodeCPU)
	if err != nil {
		return err
	}
	defer n.Stop()
	for _, t := range tenants {
		if err := deployGuest(ctx, n.URL, keys[t], t, "compute", guests["compute"]); err != nil {
			return errors.Wrapf(err, "%s", n.Stderr())
		}
	}
	for _, g := range o.floodGuests {
		if g == "compute" {
			continue // deployed above
		}
		if err := deployGuest(ctx, n.URL, noisyKey, "noisy", g, guests[g]); err != nil {
			return errors.Wrapf(err, "%s", n.Stderr())
		}
	}
	bare := map[string]*bareProc{}
	if o.flood > 0 && len(o.floodGuests) > 0 {
		for _, mode := range []string{bareWazero, bareNoWasm} {
			b, err := startBare(mode, nodeCPU)
			if err != nil {
				return err
			}
			defer b.stop()
			bare[mode] = b
		}
	}

	var routerT []target
	if routerDir != "" {
		if err := deployRouter(ctx, n.URL, keys[routerTenant], routerDir); err != nil {
			return errors.Wrapf(err, "%s", n.Stderr())
		}
		if router, routerT, err = routerTargets(ctx, n.URL, keys[routerTenant], o.routerClients); err != nil {
			return errors.Wrapf(err, "%s", n.Stderr())
		}
	}

	quietHC, noisyHC, hammerHC, adminHC := newTransportClient(2), newTransportClient(max(64, maxInt(o.noisy), o.openNoisy)), newTransportClient(o.hammer), newTransportClient(2)
	quietURL, noisyURL := n.URL+"/v1/invoke/quiet/compute/run", n.URL+"/v1/invoke/noisy/compute/run"

	cal, err := calibrate(ctx, target{hc: quietHC, url: quietURL, key: quietKey}, o)
	if err != nil {
		return errors.Wrapf(err, "%s", n.Stderr())
	}
	input := []byte(strconv.FormatUint(cal.ComputeN, 10))
	fmt.Printf("compute N=%d: activation exec %.3f ms (median), request %.3f ms solo (node pid %d, CPUs node=%q generator=%q)\n",
		cal.ComputeN, cal.ActivationExec, cal.SoloLatencyP50, n.PID, nodeCPU, cpuList(allowedCPUs()))

	quiet := target{hc: quietHC, url: quietURL, key: quietKey, input: input}
	noisyT := target{hc: noisyHC, url: noisyURL, key: noisyKey, input: input}
	// A route noisy has not deployed: every request is refused (404).
	hammerT := target{hc: hammerHC, url: n.URL + "/v1/invoke/noisy/missing/run", key: noisyKey, input: input}
	openQuiet := target{hc: newPoolClient(o.openConns), url: quietURL, key: quietKey, input: input}
	var jainT []target
	for _, t := range tenants[2:] {
		jainT = append(jainT, target{hc: newTransportClient(o.jainClients), url: n.URL + "/v1/invoke/" + t + "/compute/run", key: keys[t], input: input})
	}
	// The flood targets: per guest, the node's (tenant noisy) and each
	// baseline's, with the same body.
	var floods []floodSection
	floodTargets := map[string]map[string]target{}
	floodPID := map[string]int{floodNode: n.PID}
	if len(bare) > 0 {
		floodPID[floodBareWazero], floodPID[floodNoWasm] = bare[bareWazero].pid, bare[bareNoWasm].pid
		for _, g := range o.floodGuests {
			body := input
			if g == "echo" {
				body = bytes.Repeat([]byte("x"), o.floodBody)
			}
			floodTargets[g] = map[string]target{
				floodNode:       {hc: newTransportClient(o.flood), url: n.URL + "/v1/invoke/noisy/" + g + "/run", key: noisyKey, input: body},
				floodBareWazero: {hc: newTransportClient(o.flood), url: bare[bareWazero].url + "/" + g, key: noisyKey, input: body},
				floodNoWasm:     {hc: newTransportClient(o.flood), url: bare[bareNoWasm].url + "/" + g, key: noisyKey, input: body},
			}
			for name, tg := range floodTargets[g] {
				if err := checkAnswer(ctx, tg, g == "echo" || name == floodNoWasm); err != nil {
					return errors.Wrapf(err, "nodebench: flood %s on %s", g, name)
				}
			}
			floods = append(floods, floodSection{Guest: g, Clients: o.flood, BodyBytes: len(body),
				Servers: []floodServer{{Name: floodNode}, {Name: floodBareWazero}, {Name: floodNoWasm}}})
		}
	}

	scens := []scenario{{Name: "solo"}}
	for _, k := range o.noisy {
		scens = append(scens, scenario{Name: "noisy-" + strconv.Itoa(k), Noisy: k})
	}
	if o.hammer > 0 {
		scens = append(scens, scenario{Name: "ignore-retry-after", Hammer: o.hammer})
	}
	res := make([]scenarioResult, len(scens))
	for i, s := range scens {
		res[i].scenario = s
	}
	var open *openSection
	if o.openLoad > 0 {
		open = &openSection{LoadFraction: o.openLoad, Connections: o.openConns,
			Scenarios: []openResult{{Name: "open-solo"}, {Name: "open-noisy-" + strconv.Itoa(o.openNoisy), Noisy: o.openNoisy}}}
		open.CapacitySource = "the highest goodput_rps of the round's noisy-K scenarios"
		if len(o.noisy) == 0 {
			open.CapacitySource = "a dedicated measurement each round: goodput of " + strconv.Itoa(max(o.openNoisy, 16)) + " closed-loop noisy clients"
		}
	}
	var jain *jainSection
	if o.jainTenants > 0 {
		jain = &jainSection{Tenants: tenants[2:], ClientsPerTenant: o.jainClients}
	}
	loadBefore := loadavg()
	for r := range o.rounds {
		capacity := 0.0
		for i, s := range scens {
			if err := waitIdle(ctx, adminHC, n.URL, allKeys...); err != nil {
				return errors.Wrapf(err, "%s", n.Stderr())
			}
			groups := []group{{tg: quiet, clients: 1, keepLat: true}, {tg: noisyT, clients: s.Noisy}, {tg: hammerT, clients: s.Hammer}}
			t, cpu := runGroups(ctx, o.warmup, o.duration, groups, n.PID, pinnedCPU)
			rr := summarize(t, o.duration)
			rr.NodeCPU, rr.GenCPU, rr.OthersCPU = cpu.node, cpu.gen, cpu.others
			res[i].Rounds = append(res[i].Rounds, rr)
			if s.Noisy > 0 {
				capacity = max(capacity, rr.GoodputRPS)
			}
			fmt.Fprintf(os.Stderr, "round %d/%d %-20s quiet p50 %.3f ms p99 %.3f ms %.0f/s, noisy %.0f/s, hammer %.0f/s\n",
				r+1, o.rounds, s.Name, rr.QuietP50Ms, rr.QuietP99Ms, rr.QuietRPS, rr.NoisyRPS, rr.HammerRPS)
		}
		if open != nil {
			if len(o.noisy) == 0 {
				if err := waitIdle(ctx, adminHC, n.URL, allKeys...); err != nil {
					return errors.Wrapf(err, "%s", n.Stderr())
				}
				t, _ := runGroups(ctx, o.warmup, o.duration, []group{{tg: noisyT, clients: max(o.openNoisy, 16)}}, n.PID, pinnedCPU)
				capacity = float64(t[0].ok) / o.duration.Seconds()
			}
			rate := o.openLoad * capacity
			for i, s := range open.Scenarios {
				if err := waitIdle(ctx, adminHC, n.URL, allKeys...); err != nil {
					return errors.Wrapf(err, "%s", n.Stderr())
				}
				// The same arrival sequence for both scenarios of a round.
				rng := rand.New(rand.NewPCG(uint64(r)+1, 0x6f70656e))
				groups := []group{{tg: openQuiet, keepLat: true, rate: rate, conns: o.openConns, rng: rng}, {tg: noisyT, clients: s.Noisy}, {}}
				t, cpu := runGroups(ctx, o.warmup, o.duration, groups, n.PID, pinnedCPU)
				or := summarizeOpen(t, o.duration, capacity, rate)
				or.NodeCPU, or.GenCPU, or.OthersCPU = cpu.node, cpu.gen, cpu.others
				open.Scenarios[i].Rounds = append(open.Scenarios[i].Rounds, or)
				fmt.Fprintf(os.Stderr, "round %d/%d %-20s quiet %.0f/s offered, goodput %.4f, p50 %.3f ms p99 %.3f ms, late %d, noisy %.0f/s\n",
					r+1, o.rounds, s.Name, rate, or.GoodputFraction, or.QuietP50Ms, or.QuietP99Ms, t[0].late, or.NoisyRPS)
			}
		}
		if jain != nil {
			if err := waitIdle(ctx, adminHC, n.URL, allKeys...); err != nil {
				return errors.Wrapf(err, "%s", n.Stderr())
			}
			var groups []group
			for _, tg := range jainT {
				groups = append(groups, group{tg: tg, clients: o.jainClients})
			}
			t, cpu := runGroups(ctx, o.warmup, o.duration, groups, n.PID, pinnedCPU)
			jr := summarizeJain(t, o.duration, cpu)
			jain.Rounds = append(jain.Rounds, jr)
			fmt.Fprintf(os.Stderr, "round %d/%d %-20s Jain %.4f, tenants %.0f/s\n", r+1, o.rounds, "jain-"+strconv.Itoa(o.jainTenants), jr.Jain, jr.TenantRPS)
		}
		for fi := range floods {
			f := &floods[fi]
			for k := range o.floodRepeat {
				// The servers take turns, the order rotating every turn: no
				// server always runs first; the node and the bare wazero
				// server of a turn ran within seconds of each other.
				turn := map[string]float64{}
				for j := range f.Servers {
					sv := &f.Servers[(j+r*o.floodRepeat+k)%len(f.Servers)]
					if err := waitIdle(ctx, adminHC, n.URL, allKeys...); err != nil {
						return errors.Wrapf(err, "%s", n.Stderr())
					}
					t, cpu := runGroups(ctx, o.warmup, o.floodDur, []group{{tg: floodTargets[f.Guest][sv.Name], clients: o.flood, keepLat: true}}, floodPID[sv.Name], pinnedCPU)
					fr := summarizeFlood(t[0], o.floodDur, cpu)
					sv.Rounds = append(sv.Rounds, fr)
					turn[sv.Name] = fr.RPS
					fmt.Fprintf(os.Stderr, "round %d/%d turn %d/%d %-24s %.0f/s, p50 %.3f ms p99 %.3f ms, refusals %.0f errors %.0f\n",
						r+1, o.rounds, k+1, o.floodRepeat, "flood-"+f.Guest+"-"+sv.Name, fr.RPS, fr.P50Ms, fr.P99Ms, fr.Refusals, fr.Errors)
				}
				f.TurnRatios = append(f.TurnRatios, ratio(turn[floodNode], turn[floodBareWazero]))
			}
		}
		for j := range routerT {
			// The modes take turns, the order alternating every round.
			mi := (j + r) % len(routerT)
			m := &router.Modes[mi]
			if err := waitIdle(ctx, adminHC, n.URL, allKeys...); err != nil {
				return errors.Wrapf(err, "%s", n.Stderr())
			}
			t, cpu := runGroups(ctx, o.warmup, o.duration, []group{{tg: routerT[mi], clients: o.routerClients, keepLat: true}}, n.PID, pinnedCPU)
			rr := summarizeRouter(t[0], o.duration, cpu)
			m.Rounds = append(m.Rounds, rr)
			fmt.Fprintf(os.Stderr, "round %d/%d %-20s %.0f/s, p50 %.3f ms p99 %.3f ms, exec p50 %.3f ms, refusals %.0f errors %.0f\n",
				r+1, o.rounds, "router-"+m.Name, rr.RPS, rr.P50Ms, rr.P99Ms, rr.ExecP50Ms, rr.Refusals, rr.Errors)
		}
	}
	if exited, err := n.Exited(); exited {
		return errors.Newf("nodebench: the node exited during the run: %v\n%s", err, n.Stderr())
	}
	for i := range res {
		res[i].Median = medianOf(res[i].Rounds)
	}
	solo := res[0].Median
	for i := range res {
		m := res[i].Median
		res[i].QuietRPSRatioVsSolo = ratio(m.QuietRPS, solo.QuietRPS)
		res[i].QuietP50RatioVsSolo = ratio(m.QuietP50Ms, solo.QuietP50Ms)
		res[i].QuietP99RatioVsSolo = ratio(m.QuietP99Ms, solo.QuietP99Ms)
	}
	if open != nil {
		for i := range open.Scenarios {
			open.Scenarios[i].Median = medianOpen(open.Scenarios[i].Rounds)
		}
		open.judge(cal.ActivationExec)
	}
	if jain != nil {
		jain.Median = medianJain(jain.Rounds)
	}
	for fi := range floods {
		for si := range floods[fi].Servers {
			floods[fi].Servers[si].Median = medianFlood(floods[fi].Servers[si].Rounds)
		}
		floods[fi].judge()
	}
	if len(routerT) > 0 {
		router.judge()
	}

	out := results{
		Date: time.Now().UTC().Format(time.RFC3339),
		Machine: map[string]any{"goos": runtime.GOOS, "goarch": runtime.GOARCH, "host_cpus": hostCPUs(), "generator_gomaxprocs": runtime.GOMAXPROCS(0),
			"go": runtime.Version(), "loadavg_before": loadBefore, "loadavg_after": loadavg()},
		Settings: map[string]any{"duration_s": o.duration.Seconds(), "warmup_s": o.warmup.Seconds(), "rounds": o.rounds,
			"noisy_clients": o.noisy, "hammer_clients": o.hammer, "quiet_clients": 1,
			"cells": "tiny 2 + small 2", "fairness": "fuel", "load_source": "fixed:0.1,0.1",
			"hammer_route":            "noisy/missing/run (404)",
			"open_load":               o.openLoad,
			"open_noisy_clients":      o.openNoisy,
			"open_connections":        o.openConns,
			"jain_tenants":            o.jainTenants,
			"jain_clients_per_tenant": o.jainClients,
			"flood_clients":           o.flood,
			"flood_body_bytes":        o.floodBody,
			"flood_repeat":            o.floodRepeat,
			"flood_duration_s":        o.floodDur.Seconds(),
			"flood_guests":            o.floodGuests,
			"router":                  o.router,
			"router_clients":          o.routerClients},
		Pinning:     map[string]string{"node_cpus": nodeCPU, "generator_cpus": ""},
		Calibration: cal,
		Scenarios:   res,
		Summary:     summary(res),
		OpenLoop:    open,
		Jain:        jain,
		Flood:       floods,
		Router:      router,
		Notes: []string{
			"closed loop: each client sends its next request when the previous answer arrived; keep-alive connections",
			"refusals are answered non-2xx requests; errors are transport errors",
			"per-round figures count answers that arrived in the measured window (after warm-up); medians are over rounds",
			"ratios divide the scenario's median by solo's median",
			"node_cpu_utilization and generator_cpu_utilization: CPU time in the measured window divided by its length (1.0 = one CPU busy); others_on_node_cpu (and flood's others_on_server_cpu): what every other process used of the pinned server CPU (-1: unknown)",
			"quiet_server_*: the node's Server-Timing of quiet's answers; quiet_outside_handler: request latency less those four (kernel, the node's Go scheduler before the headers were read, the generator)",
			"open_loop: quiet sends at Poisson arrivals of load_fraction × the round's capacity, each request on its own goroutine over a bounded pool of keep-alive connections; requests scheduled in the window count and their answers are awaited",
			"jain: equal tenants each with the same closed-loop clients on the compute guest; jain_index = (Σx)²/(N·Σx²) of their 2xx rates",
			"flood: the same closed-loop clients and body against the node (tenant noisy), a bare net/http + wazero server and a bare net/http server without wasm, each pinned to the node's CPU, one after another in every round",
			"router: closed-loop keep-alive clients send GET <route>/hello?name=Ada to the Go example's WAGI router (examples/go/router, tenant router), deployed as a fresh command revision and as a snapshot reactor revision, one mode after the other in every round; exec is the node's Server-Timing",
		},
	}
	extendSummary(out.Summary, open, jain, floods)
	if router != nil {
		router.summarize(out.Summary)
	}
	if nodeCPU != "" {
		out.Pinning["generator_cpus"] = cpuList(allowedCPUs())
	}
	outPath := o.out
	if !filepath.IsAbs(outPath) {
		outPath = filepath.Join(root, outPath) // relative to the module root
	}
	if err := writeJSON(outPath, out); err != nil {
		return err
	}
	printTable(res, cal)
	printExtra(open, jain, floods)
	if router != nil {
		router.print()
	}
	fmt.Printf("wrote %s\n", o.out)
	if o.svg != "" {
		svgPath := o.svg
		if !filepath.IsAbs(svgPath) {
			svgPath = filepath.Join(root, svgPath)
		}
		if err := writeSVG(svgPath, out); err != nil {
			return err
		}
		fmt.Printf("wrote %s\n", o.svg)
	}
	return nil
}

func maxInt(xs []int) int {
	m := 0
	for _, x := range xs {
		m = max(m, x)
	}
	return m
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

func writeJSON(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return errors.Wrap(err, "nodebench: encode results")
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return errors.Wrap(err, "nodebench: results dir")
	}
	return errors.Wrap(os.WriteFile(path, append(data, '\n'), 0o644), "nodebench: write results")
}

// summarize turns the quiet, noisy and hammer tallies into a round's figures.
func summarize(t []*tally, d time.Duration) roundResult {
	q, nz, h := t[0], t[1], t[2]
	slices.Sort(q.lat)
	for i := range q.timing {
		slices.Sort(q.timing[i])
	}
	slices.Sort(q.outside)
	sec := d.Seconds()
	rr := roundResult{
		QuietP50Ms: ms(percentile(q.lat, 0.50)), QuietP99Ms: ms(percentile(q.lat, 0.99)),
		QuietFrontP50: ms(percentile(q.timing[0], 0.50)), QuietQueueP50: ms(percentile(q.timing[1], 0.50)),
		QuietQueueP99: ms(percentile(q.timing[1], 0.99)), QuietExecP50: ms(percentile(q.timing[2], 0.50)),
		QuietBackP50: ms(percentile(q.timing[3], 0.50)), QuietOutside: ms(percentile(q.outside, 0.50)),
		QuietRPS: float64(q.ok) / sec, QuietRefusals: float64(q.refused), QuietErrors: float64(q.errs),
		NoisyRPS: float64(nz.ok) / sec, NoisyRefusals: float64(nz.refused), NoisyErrors: float64(nz.errs),
		HammerRPS: float64(h.ok+h.refused) / sec, HammerErrors: float64(h.errs),
		GoodputRPS: float64(q.ok+nz.ok+h.ok) / sec,
		Statuses:   map[string]map[string]int{},
	}
	for name, tl := range map[string]*tally{"quiet": q, "noisy": nz, "hammer": h} {
		if len(tl.statuses) == 0 {
			continue
		}
		m := map[string]int{}
		for s, c := range tl.statuses {
			m[strconv.Itoa(s)] = c
		}
		rr.Statuses[name] = m
	}
	return rr
}

// medianOf takes each field's median over rounds.
func medianOf(rs []roundResult) roundResult {
	col := func(f func(roundResult) float64) float64 {
		xs := make([]float64, len(rs))
		for i, r := range rs {
			xs[i] = f(r)
		}
		return median(xs)
	}
	return roundResult{
		QuietP50Ms:    col(func(r roundResult) float64 { return r.QuietP50Ms }),
		QuietP99Ms:    col(func(r roundResult) float64 { return r.QuietP99Ms }),
		QuietRPS:      col(func(r roundResult) float64 { return r.QuietRPS }),
		QuietRefusals: col(func(r roundResult) float64 { return r.QuietRefusals }),
		QuietErrors:   col(func(r roundResult) float64 { return r.QuietErrors }),
		QuietFrontP50: col(func(r roundResult) float64 { return r.QuietFrontP50 }),
		QuietQueueP50: col(func(r roundResult) float64 { return r.QuietQueueP50 }),
		QuietQueueP99: col(func(r roundResult) float64 { return r.QuietQueueP99 }),
		QuietExecP50:  col(func(r roundResult) float64 { return r.QuietExecP50 }),
		QuietBackP50:  col(func(r roundResult) float64 { return r.QuietBackP50 }),
		QuietOutside:  col(func(r roundResult) float64 { return r.QuietOutside }),
		NodeCPU:       col(func(r roundResult) float64 { return r.NodeCPU }),
		GenCPU:        col(func(r roundResult) float64 { return r.GenCPU }),
		OthersCPU:     col(func(r roundResult) float64 { return r.OthersCPU }),
		NoisyRPS:      col(func(r roundResult) float64 { return r.NoisyRPS }),
		NoisyRefusals: col(func(r roundResult) float64 { return r.NoisyRefusals }),
		NoisyErrors:   col(func(r roundResult) float64 { return r.NoisyErrors }),
		HammerRPS:     col(func(r roundResult) float64 { return r.HammerRPS }),
		HammerErrors:  col(func(r roundResult) float64 { return r.HammerErrors }),
		GoodputRPS:    col(func(r roundResult) float64 { return r.GoodputRPS }),
	}
}

// summary is the headline: the worst noisy scenario's quiet ratios and the
// ignore-Retry-After p99 ratio.
func summary(res []scenarioResult) map[string]any {
	s := map[string]any{"solo_quiet_p50_ms": res[0].Median.QuietP50Ms, "solo_quiet_p99_ms": res[0].Median.QuietP99Ms,
		"solo_quiet_rps": res[0].Median.QuietRPS}
	for _, r := range res[1:] {
		if r.Noisy > 0 {
			s["quiet_rps_ratio_vs_solo_"+r.Name] = r.QuietRPSRatioVsSolo
			s["quiet_p99_ratio_vs_solo_"+r.Name] = r.QuietP99RatioVsSolo
		}
		if r.Hammer > 0 {
			s["ignore_retry_after_quiet_p99_ratio_vs_solo"] = r.QuietP99RatioVsSolo
			s["ignore_retry_after_quiet_rps_ratio_vs_solo"] = r.QuietRPSRatioVsSolo
			s["ignore_retry_after_hammer_answers_per_s"] = r.Median.HammerRPS
		}
	}
	return s
}

func printTable(res []scenarioResult, cal calibration) {
	fmt.Printf("\ncompute N=%d, one activation executes in %.3f ms (median Server-Timing exec)\n", cal.ComputeN, cal.ActivationExec)
	fmt.Printf("%-20s %9s %9s %9s %7s %7s %9s %7s %9s %9s %7s\n",
		"scenario", "q p50 ms", "q p99 ms", "q req/s", "q/solo", "q refus", "n req/s", "n refus", "hammer/s", "goodput/s", "p99/solo")
	for _, r := range res {
		m := r.Median
		fmt.Printf("%-20s %9.3f %9.3f %9.0f %7.2f %7.0f %9.0f %7.0f %9.0f %9.0f %7.2f\n",
			r.Name, m.QuietP50Ms, m.QuietP99Ms, m.QuietRPS, r.QuietRPSRatioVsSolo, m.QuietRefusals,
			m.NoisyRPS, m.NoisyRefusals, m.HammerRPS, m.GoodputRPS, r.QuietP99RatioVsSolo)
	}
	fmt.Printf("\nwhere quiet's time went (node Server-Timing, median of rounds, ms)\n%-20s %9s %9s %9s %9s %9s %9s %9s %9s %9s\n",
		"scenario", "front p50", "queue p50", "queue p99", "exec p50", "back p50", "outside", "node cpu", "gen cpu", "others")
	for _, r := range res {
		m := r.Median
		fmt.Printf("%-20s %9.3f %9.3f %9.3f %9.3f %9.3f %9.3f %8.0f%% %8.0f%% %8.0f%%\n", r.Name, m.QuietFrontP50, m.QuietQueueP50,
			m.QuietQueueP99, m.QuietExecP50, m.QuietBackP50, m.QuietOutside, 100*m.NodeCPU, 100*m.GenCPU, 100*m.OthersCPU)
	}
}
