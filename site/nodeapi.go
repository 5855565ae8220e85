package site

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/meridian-crawler/meridian/certs"
	"github.com/meridian-crawler/meridian/rounds/control"
)

// NodeAPI calls a running node's API (--api) as the operator's commands
// do: over mutual TLS with the node's own certificate when it has one.
type NodeAPI struct {
	c    *http.Client
	base string
}

// DialNode returns a client of the node whose data directory is data, or,
// for a node without --certs, of the node API at addr.
func DialNode(data, addr string) (*NodeAPI, error) {
	n := &NodeAPI{c: &http.Client{Timeout: 3 * time.Minute}}
	scheme := "http"
	if addr == "" {
		in, err := ReadInfo(data)
		if err != nil {
			return nil, err
		}
		if in.Left {
			return nil, fmt.Errorf("site: node %s (%s) has left its site", in.Node, data)
		}
		addr = in.API
		if in.Certs != "" {
			t, err := certs.LoadNode(in.Certs, in.Region, in.Node)
			if err != nil {
				return nil, fmt.Errorf("site: node %s's certificate: %w", in.Node, err)
			}
			n.c.Transport = &http.Transport{TLSClientConfig: t.Client(certs.AllowNodesOf(in.Region))}
			scheme = "https"
		}
	}
	if addr == "" {
		return nil, errors.New("site: no node API address (give --data of a node that ran, or --addr)")
	}
	n.base = scheme + "://" + addr
	return n, nil
}

// Controls returns the site's controls.
func (n *NodeAPI) Controls(ctx context.Context) (control.Controls, error) {
	var ctl control.Controls
	err := n.call(ctx, http.MethodGet, "/site/control", "", nil, &ctl)
	return ctl, err
}

// Control applies a change to the site's controls and returns them.
func (n *NodeAPI) Control(ctx context.Context, op control.Op) (control.Controls, error) {
	var ctl control.Controls
	b, _ := json.Marshal(op)
	err := n.call(ctx, http.MethodPost, "/site/control", "application/json", b, &ctl)
	return ctl, err
}

// Inject sends seed lines (one URL a line, # comments) to the site.
func (n *NodeAPI) Inject(ctx context.Context, seeds io.Reader) (InjectReply, error) {
	var reply InjectReply
	body, err := io.ReadAll(io.LimitReader(seeds, maxInjectBody+1))
	if err != nil {
		return reply, fmt.Errorf("site: inject: read the seeds: %w", err)
	}
	if len(body) > maxInjectBody {
		return reply, fmt.Errorf("site: inject: more than %d bytes of seeds: split them", maxInjectBody)
	}
	err = n.call(ctx, http.MethodPost, "/site/inject", "text/plain", body, &reply)
	return reply, err
}

func (n *NodeAPI) call(ctx context.Context, method, path, ctype string, body []byte, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, n.base+path, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("site: %s: %w", path, err)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	resp, err := n.c.Do(req)
	if err != nil {
		return fmt.Errorf("site: no node API answering at %s (is it running? a node with --certs: give --data, not --addr): %w", n.base, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return fmt.Errorf("site: %s refused: %s", path, strings.TrimSpace(string(msg)))
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 16<<20)).Decode(out); err != nil {
		return fmt.Errorf("site: %s: the answer: %w", path, err)
	}
	return nil
}
