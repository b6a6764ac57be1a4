// Command probe is the container health check: a tiny static binary that
// GETs the service's /healthz on loopback and exits 0 on a 2xx answer, 1
// otherwise. Distroless and scratch images have no shell or curl, and the
// services are not asked to grow a -healthcheck flag.
//
//	probe                      # http://127.0.0.1<HTTP_ADDR>/healthz, HTTP_ADDR from the environment
//	probe http://host:8081/readyz
package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"
)

func main() {
	if err := run(context.Background(), os.Args[1:], os.Getenv); err != nil {
		fmt.Fprintln(os.Stderr, "probe:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, getenv func(string) string) error {
	target := ""
	if len(args) > 0 {
		target = args[0]
	} else {
		u, err := healthURL(getenv("HTTP_ADDR"))
		if err != nil {
			return err
		}
		target = u
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return fmt.Errorf("bad URL %q: %w", target, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("GET %s: %w", target, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("GET %s: %s", target, resp.Status)
	}
	return nil
}

// healthURL turns a listen address (":8081", "0.0.0.0:8081") into the
// loopback /healthz URL.
func healthURL(addr string) (string, error) {
	if addr == "" {
		return "", fmt.Errorf("HTTP_ADDR is empty and no URL was given")
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("HTTP_ADDR %q: %w", addr, err)
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port) + "/healthz", nil
}
