// Command cluster-demo is make cluster-demo: three latent-node binaries
// sharing one catalog through an embedded etcd, behind HAProxy (when it is
// installed) configured from deploy/haproxy/haproxy.cfg. It deploys the
// demo's hello guest once through the first node, invokes it through the
// balancer, prints the members and the commands to try, and runs until
// interrupted.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cockroachdb/errors"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"

	"github.com/latent-node/latent-node/client"
	"github.com/latent-node/latent-node/node/config"
)

func main() {
	bin := flag.String("bin", "bin/latent-node", "the latent-node binary")
	base := flag.Int("port", 18080, "the balancer's port; the nodes take the next three, etcd the two after")
	flag.Parse()
	if err := run(*bin, *base); err != nil {
		fmt.Fprintf(os.Stderr, "cluster-demo: %v\n", err)
		os.Exit(1)
	}
}

func run(bin string, base int) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	dir, err := os.MkdirTemp("", "latent-cluster-demo-")
	if err != nil {
		return errors.Wrap(err, "temporary directory")
	}
	defer func() { _ = os.RemoveAll(dir) }()

	etcdURL := "http://127.0.0.1:" + strconv.Itoa(base+4)
	e, err := startEtcd(filepath.Join(dir, "etcd"), etcdURL, "http://127.0.0.1:"+strconv.Itoa(base+5))
	if err != nil {
		return err
	}
	defer e.Close()
	fmt.Printf("etcd (embedded) at %s\n", etcdURL)

	key, hash, err := keygen(bin)
	if err != nil {
		return err
	}
	var urls []string
	for i := 1; i <= 3; i++ {
		u := "http://127.0.0.1:" + strconv.Itoa(base+i)
		urls = append(urls, u)
		cfgPath := filepath.Join(dir, "node"+strconv.Itoa(i)+".toml")
		if err := os.WriteFile(cfgPath, nodeConfig(filepath.Join(dir, "data"+strconv.Itoa(i)), hash, etcdURL, i, u), 0o600); err != nil {
			return errors.Wrap(err, "write configuration")
		}
		cmd := exec.CommandContext(ctx, bin, "serve", "--config", cfgPath)
		logf, err := os.Create(filepath.Join(dir, "node"+strconv.Itoa(i)+".log"))
		if err != nil {
			return errors.Wrap(err, "node log")
		}
		cmd.Stdout, cmd.Stderr = logf, logf
		if err := cmd.Start(); err != nil {
			return errors.Wrap(err, "start node")
		}
		defer func() { _ = cmd.Process.Signal(syscall.SIGTERM); _ = cmd.Wait() }()
		fmt.Printf("node-%d at %s (log %s)\n", i, u, logf.Name())
	}
	for _, u := range urls {
		if err := waitReady(ctx, u); err != nil {
			return err
		}
	}

	front := urls[0]
	balancer := "127.0.0.1:" + strconv.Itoa(base)
	if hp, err := exec.LookPath("haproxy"); err == nil {
		cfg, err := os.ReadFile("deploy/haproxy/haproxy.cfg")
		if err != nil {
			return errors.Wrap(err, "read the HAProxy configuration")
		}
		text := strings.NewReplacer("BALANCER", balancer, "NODE_1", strings.TrimPrefix(urls[0], "http://"),
			"NODE_2", strings.TrimPrefix(urls[1], "http://"), "NODE_3", strings.TrimPrefix(urls[2], "http://")).Replace(string(cfg))
		hpCfg := filepath.Join(dir, "haproxy.cfg")
		if err := os.WriteFile(hpCfg, []byte(text), 0o600); err != nil {
			return errors.Wrap(err, "write the HAProxy configuration")
		}
		cmd := exec.CommandContext(ctx, hp, "-db", "-f", hpCfg)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Start(); err != nil {
			return errors.Wrap(err, "start haproxy")
		}
		defer func() { _ = cmd.Process.Signal(syscall.SIGTERM); _ = cmd.Wait() }()
		front = "http://" + balancer
		if err := waitReady(ctx, front); err != nil {
			return err
		}
		fmt.Printf("HAProxy at %s, balancing on /readyz\n", front)
	} else {
		fmt.Println("haproxy is not installed (Debian: apt-get install haproxy): invoking node-1 directly")
	}

	c1, err := client.New(urls[0], key)
	if err != nil {
		return err
	}
	hello, err := os.ReadFile("testdata/wasm/hello.wasm") // the demo's guest; make runs from the module root
	if err != nil {
		return errors.Wrap(err, "read the hello guest")
	}
	digest, err := c1.UploadArtifact(ctx, hello)
	if err != nil {
		return errors.Wrap(err, "upload")
	}
	manifest := map[string]any{"tenant": "demo", "service": "hello", "revisions": []any{map[string]any{
		"name": "v1", "artifact": digest, "trust_class": "untrusted",
		"ceiling": map[string]any{"cpu_fuel": 100_000_000, "memory_bytes": "16MiB", "wall_time": "2s"}}},
		"routes": []any{map[string]any{"name": "greet", "targets": []any{map[string]any{"revision": "v1", "weight": 1}}}}}
	d, err := c1.Deploy(ctx, "demo", "hello", manifest)
	if err != nil {
		return errors.Wrap(err, "deploy")
	}
	fmt.Printf("deployed demo/hello through node-1: release %s, generation %d\n", d.Release, d.Generation)
	cf, err := client.New(front, key)
	if err != nil {
		return err
	}
	for i := range 3 {
		res, err := cf.Invoke(ctx, "demo", "hello", "greet", []byte("ada"), client.InvokeOptions{})
		if err != nil {
			return errors.Wrap(err, "invoke")
		}
		fmt.Printf("invoke %d through %s: %s", i+1, front, res.Output)
	}
	members, err := c1.Nodes(ctx)
	if err != nil {
		return err
	}
	for _, m := range members {
		fmt.Printf("member %s %s generation %d fresh=%v ready=%v\n", m.ID, m.AdvertiseURL, m.Generation, m.Fresh, m.Ready)
	}
	fmt.Printf("\ntry:\n  curl -s -H 'Authorization: Bearer %s' --data 'ada' %s/v1/invoke/demo/hello/greet\n", key, front)
	fmt.Printf("  %s nodes --node %s --key %s\n", bin, urls[0], key)
	fmt.Println("interrupt (Ctrl-C) to stop")
	<-ctx.Done()
	return nil
}

// nodeConfig is the demo's configuration with a data directory, the key's
// hash and a [cluster] table.
func nodeConfig(dataDir, hash, etcdURL string, i int, advertise string) []byte {
	text := string(config.DemoTOML)
	text = strings.Replace(text, "[node]\n", "[node]\ndata_dir = "+strconv.Quote(dataDir)+"\n", 1)
	u, _ := url.Parse(advertise)
	text = strings.Replace(text, `listen = "127.0.0.1:8080"`, "listen = "+strconv.Quote(u.Host), 1)
	text = strings.Replace(text, "api_keys = []", "api_keys = ["+strconv.Quote(hash)+"]", 1)
	return []byte(text + fmt.Sprintf(`
[cluster]
endpoints = [%q]
node_id = "node-%d"
advertise_url = %q
`, etcdURL, i, advertise))
}

func startEtcd(dir, client, peer string) (*embed.Etcd, error) {
	cfg := embed.NewConfig()
	cfg.Dir = dir
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	cu, _ := url.Parse(client)
	pu, _ := url.Parse(peer)
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*cu}, []url.URL{*cu}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*pu}, []url.URL{*pu}
	cfg.InitialCluster = cfg.Name + "=" + peer
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, errors.Wrap(err, "start etcd")
	}
	select {
	case <-e.Server.ReadyNotify():
		return e, nil
	case <-time.After(30 * time.Second):
		e.Close()
		return nil, errors.New("etcd not ready within 30s")
	}
}

func keygen(bin string) (key, hash string, err error) {
	out, err := exec.Command(bin, "keygen").Output()
	if err != nil {
		return "", "", errors.Wrap(err, "keygen")
	}
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "key:"); ok {
			key = strings.TrimSpace(v)
		}
		if v, ok := strings.CutPrefix(sc.Text(), "hash:"); ok {
			hash = strings.TrimSpace(v)
		}
	}
	if key == "" || hash == "" {
		return "", "", errors.Newf("keygen printed %q", out)
	}
	return key, hash, nil
}

func waitReady(ctx context.Context, base string) error {
	hc := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if resp, err := hc.Get(base + "/readyz"); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return errors.Newf("%s/readyz did not answer 200 within 30s", base)
}
