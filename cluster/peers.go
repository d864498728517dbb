package cluster

// The cluster's peers as this node sees them: the peer token that
// authenticates requests between members (read from etcd, rotated there)
// and the requests this node sends to other members.

import (
	"context"
	"crypto/subtle"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/latent-node/latent-node/vocab"
)

// peers holds the peer token and sends requests to other members with it.
// Its lock is a leaf.
type peers struct {
	http *http.Client
	log  *slog.Logger
	mu   struct {
		sync.Mutex
		token     string // the peer token ("" until read)
		prevToken string // the token before the last change, accepted until prevUntil
		prevUntil time.Time
	}
}

// authorized reports whether token is the cluster's peer token: the
// one last read from etcd, or the one before it for tokenGrace after the
// change (the token is re-read at every freshness check, so rotating it
// in etcd needs no restart).
func (p *peers) authorized(token string) bool {
	now := time.Now()
	p.mu.Lock()
	want, prev := p.mu.token, p.mu.prevToken
	if now.After(p.mu.prevUntil) {
		prev = ""
	}
	p.mu.Unlock()
	ok := want != "" && subtle.ConstantTimeCompare([]byte(token), []byte(want)) == 1
	return ok || prev != "" && subtle.ConstantTimeCompare([]byte(token), []byte(prev)) == 1
}

// setToken records token as the peer token read from etcd at now.
func (p *peers) setToken(token string, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if token == "" || token == p.mu.token {
		return
	}
	if p.mu.token != "" {
		p.mu.prevToken, p.mu.prevUntil = p.mu.token, now.Add(tokenGrace)
		p.log.Info("cluster: the peer token changed in etcd; the previous one is accepted for a grace period", "grace", tokenGrace)
	}
	p.mu.token = token
}

// token returns the peer token ("" until one was read).
func (p *peers) token() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mu.token
}

// tokens returns the peer token and, within its grace period, the
// previous one.
func (p *peers) tokens() []string {
	now := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mu.prevToken != "" && now.Before(p.mu.prevUntil) {
		return []string{p.mu.token, p.mu.prevToken}
	}
	return []string{p.mu.token}
}

// request sends a request with the peer token to path on the member
// whose API is at base; the caller closes the answer's body. Right after
// the token changed, a peer that has not read the new one yet answers 404:
// the request is sent once more with the previous token.
func (p *peers) request(ctx context.Context, method, base, path string) (*http.Response, error) {
	tokens := p.tokens()
	for i, token := range tokens {
		req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(base, "/")+path, nil)
		if err != nil {
			return nil, errors.Wrap(err, "request")
		}
		req.Header.Set(PeerTokenHeader, token)
		resp, err := p.http.Do(req)
		if err != nil {
			return nil, errors.Wrap(err, "request")
		}
		if resp.StatusCode == http.StatusNotFound && i+1 < len(tokens) {
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
			_ = resp.Body.Close()
			continue
		}
		return resp, nil
	}
	return nil, errors.AssertionFailedf("cluster: no peer token to send")
}

// askApplied asks member to answer once its catalog reached gen.
func (p *peers) askApplied(ctx context.Context, member Member, gen vocab.Generation) bool {
	resp, err := p.request(ctx, http.MethodGet, member.AdvertiseURL, "/v1/cluster/applied/"+strconv.FormatUint(uint64(gen), 10))
	if err != nil {
		return false
	}
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusNoContent
}

// askReplicate asks member to fetch artifact d for tenant.
func (p *peers) askReplicate(ctx context.Context, member Member, tenant vocab.TenantID, d vocab.Digest) error {
	resp, err := p.request(ctx, http.MethodPost, member.AdvertiseURL, "/v1/cluster/replicate/"+url.PathEscape(string(tenant))+"/"+string(d))
	if err != nil {
		return err
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent && resp.StatusCode != http.StatusOK {
		return errors.Newf("answered %d", resp.StatusCode)
	}
	return nil
}

// fetch downloads d from the peer at base and hands the bytes to store.
func (p *peers) fetch(ctx context.Context, base string, d vocab.Digest, store func(io.Reader) error) error {
	resp, err := p.request(ctx, http.MethodGet, base, "/v1/cluster/artifacts/"+string(d))
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return errors.Newf("answered %d", resp.StatusCode)
	}
	return store(resp.Body)
}
