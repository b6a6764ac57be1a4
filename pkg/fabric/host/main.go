package host

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// runFunc is a service's run function: it serves until ctx ends and returns
// nil after a graceful shutdown, or the error that stopped it. Tests call it
// directly with their own environment (fabrictest.StartService).
type runFunc func(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error

// Main is a service's whole main: it runs run with the process's
// arguments, environment and stdout until SIGINT or SIGTERM, and exits 1
// with the error, prefixed by service, when run fails. One function, so
// every service stops on the same signals and fails the same way.
func Main(service string, run runFunc) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args, os.Getenv, os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, service+":", err)
		os.Exit(1)
	}
}
