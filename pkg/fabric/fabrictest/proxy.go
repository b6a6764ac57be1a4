package fabrictest

import (
	"io"
	"net"
	"sync/atomic"
	"testing"
)

// proxy forwards TCP connections to a target while it is up; while down it
// hangs up on each new connection at once, as an unreachable dependency
// would. Tests put it between a service and a store to take the store away
// and bring it back without touching the store itself.
type proxy struct {
	// Addr is where the service should connect (host:port).
	Addr   string
	target string
	up     atomic.Bool
}

// StartProxy listens on a free loopback port, forwarding to target once
// Up is called; it stops when the test ends.
func StartProxy(t testing.TB, target string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{Addr: ln.Addr().String(), target: target}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if !p.up.Load() {
				c.Close()
				continue
			}
			go p.forward(c)
		}
	}()
	return p
}

// Up makes new connections reach the target; Down refuses them.
func (p *proxy) Up() { p.up.Store(true) }

// down makes the proxy hang up on new connections (open ones go on).
func (p *proxy) down() { p.up.Store(false) }

func (p *proxy) forward(c net.Conn) {
	defer c.Close()
	u, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	defer u.Close()
	go func() { _, _ = io.Copy(u, c) }()
	_, _ = io.Copy(c, u)
}
