// Command testinfra starts the platform's infrastructure in containers
// (package e2e/testinfra: RabbitMQ, PostgreSQL with pgvector, MinIO from the
// local stand-in images) for tests in other modules, which cannot import
// testcontainers-go themselves (pkg/fabric's tests, through fabrictest), and
// removes it again (`make test-containers`).
//
//	testinfra up [-run ID] [-env-file PATH]  start; print the environment (or write it to PATH); leave them running
//	testinfra down [-run ID]                 remove the containers of run ID, or every testinfra container
//
// The environment is KEY='VALUE' lines for a shell (`set -a; . PATH; set +a`):
// AMQP_HOST, AMQP_URL, RABBITMQ_MGMT_URL, RABBITMQ_USER, RABBITMQ_PASS,
// RABBITMQCTL, DATABASE_URL, S3_ENDPOINT, S3_ACCESS_KEY, S3_SECRET_KEY,
// TESTINFRA_RUN. Images: RABBITMQ_IMAGE, POSTGRES_IMAGE, MINIO_IMAGE, by
// default the stand-ins deploy/docker/local/local.env names. There is no
// reaper: `down` is the cleanup.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	tclog "github.com/testcontainers/testcontainers-go/log"

	"github.com/agora-platform/agora/e2e/testinfra"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	switch os.Args[1] {
	case "up":
		err = up(ctx, os.Args[2:])
	case "down":
		err = down(ctx, os.Args[2:])
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "testinfra:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: testinfra up [-run ID] [-env-file PATH] | testinfra down [-run ID]")
	os.Exit(2)
}

func up(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("up", flag.ExitOnError)
	run := fs.String("run", "", "label value of the containers (default: random)")
	envFile := fs.String("env-file", "", "write the environment here instead of stdout")
	fs.Parse(args)
	images, err := testinfra.ImagesFrom(os.Getenv)
	if err != nil {
		return err
	}
	t0 := time.Now()
	in, err := testinfra.Start(ctx, images, *run)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "testinfra: run %s up in %.1f s (%s, %s, %s); remove with: testinfra down -run %s\n",
		in.Run, time.Since(t0).Seconds(), images.RabbitMQ, images.Postgres, images.MinIO, in.Run)
	var w io.Writer = os.Stdout
	if *envFile != "" {
		f, err := os.OpenFile(*envFile, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
		if err != nil {
			return err
		}
		defer f.Close()
		w = f
	}
	keys := make([]string, 0, len(in.Env))
	for k := range in.Env {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		// Single quotes: the values hold no quote, RABBITMQCTL holds spaces.
		if _, err := fmt.Fprintf(w, "%s='%s'\n", k, strings.ReplaceAll(in.Env[k], "'", `'\''`)); err != nil {
			return err
		}
	}
	return nil
}

func down(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("down", flag.ExitOnError)
	run := fs.String("run", "", "remove only this run's containers (default: every testinfra container)")
	fs.Parse(args)
	tclog.SetDefault(tclog.NewNoopLogger()) // no banner: the names removed are printed
	// Cleanup runs even after an interrupt of `up`.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	defer cancel()
	names, err := testinfra.Down(ctx, *run)
	fmt.Fprintf(os.Stderr, "testinfra: removed %d container(s) %s\n", len(names), strings.Join(names, " "))
	return err
}
