// Command seifake serves the fake SEI gateway of package seitest over
// HTTP, for the compose stack and its end-to-end run: SEI, the external
// protocol system, is a party the platform does not own, so the stack
// stands it in. It registers every request (nothing is told to fail) and
// answers GET /healthz for the container's probe.
//
//	HTTP_ADDR=:8089 seifake
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/agora-platform/agora/pkg/fabric/host"
	"github.com/agora-platform/agora/services/workflow/seitest"
)

func main() { host.Main("seifake", run) }

func run(ctx context.Context, _ []string, getenv func(string) string, stdout io.Writer) error {
	addr := getenv("HTTP_ADDR")
	if addr == "" {
		addr = "127.0.0.1:8089"
	}
	fake := seitest.New()
	defer fake.Close()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	mux.Handle("/", fake)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("seifake: %w", err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	fmt.Fprintf(stdout, "listening on %s\n", ln.Addr())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		return srv.Shutdown(sctx)
	case err := <-errc:
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return fmt.Errorf("seifake: %w", err)
	}
}
