// Package peerurl checks the URL a cluster member advertises to the others:
// the node's own cluster.advertise_url when its configuration is validated,
// and every member record read from etcd before a peer request (with the
// peer token) is sent to it.
//
// A valid URL is scheme://host:port with an optional trailing "/": scheme
// http or https, a host, an explicit port, and nothing else — no userinfo,
// path, query or fragment. The peer paths are appended to it, so anything
// else would let a member record steer the token elsewhere (a query that
// swallows the path, credentials for another host). When the node serves
// https ([node.tls]), https is required too: the token then never crosses
// the network in clear text.
package peerurl

import (
	"net/url"
	"strconv"

	"github.com/cockroachdb/errors"
)

// Check returns nil when raw is a valid advertise URL, else an error saying
// what is wrong. requireHTTPS refuses the http scheme.
func Check(raw string, requireHTTPS bool) error {
	u, err := url.Parse(raw)
	if err != nil {
		return errors.New("does not parse as a URL")
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return errors.New("scheme must be http or https")
	case requireHTTPS && u.Scheme != "https":
		return errors.New("scheme must be https: this node serves TLS ([node.tls]), so peers are reached over https")
	case u.Opaque != "" || u.User != nil:
		return errors.New("must not hold user information")
	case u.Host == "" || u.Hostname() == "":
		return errors.New("must name a host")
	case u.Path != "" && u.Path != "/" || u.RawPath != "":
		return errors.New(`must have no path other than "/"`)
	case u.RawQuery != "" || u.ForceQuery:
		return errors.New("must have no query")
	case u.Fragment != "" || u.RawFragment != "":
		return errors.New("must have no fragment")
	}
	port, err := strconv.Atoi(u.Port())
	if err != nil || port < 1 || port > 65535 || u.Port()[0] == '0' && len(u.Port()) > 1 {
		return errors.New("must name a port between 1 and 65535")
	}
	return nil
}
