// Command fabricctl operates the event fabric: topology, catalogue and
// dead-letter queues.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "fabricctl:", err)
		os.Exit(1)
	}
}

const usage = `usage: fabricctl <command> [flags]

commands:
  topology apply [--file F]   set the retry tiers' policies (RABBITMQ_MGMT_URL), declare
                              exchanges, queues, retry tiers and DLQs (AMQP_URL), upgrade
                              retry tiers of earlier versions without losing a message, and
                              audit the policies on the queues; F is any topology file:
                              deploy/topologies/{platform,car,imoveis}.yaml
  topology check [--file F]   what apply would fix or that can cost a message; changes nothing
  topology show  [--file F]   print the queues, arguments and policies that apply would set
  catalog list                list every registered event, command and job
  catalog show TYPE           print one definition and its JSON Schema
  catalog asyncapi [-o FILE | --check FILE]
                              the AsyncAPI 3.0 document of the catalog and the
                              platform topology (committed as docs/asyncapi.json)
  catalog check --against REF [--dir D]
                              compare the catalog in the working tree (D, default
                              pkg/fabric/catalog) with the one at git REF; fails
                              on changes that need a new type version
  dlq list|show|replay|purge|audit --queue Q ...
                              inspect and (audited) replay or purge dead letters
  token [--tenant T --sub S --roles r1,r2 --ttl D]
                              mint a local-development JWT (key in .data/jwt)
  explain TYPE [--workflow URL --token JWT]
                              the type's definition and schema, and the tenant's
                              active subscriptions to it (GET /v1/explain/TYPE)
  subscription list|show|create|version|move|rollback --workflow URL --token JWT ...
                              manage the tenant's subscriptions (the workflow's REST API)
  release build|check|apply|rollback ...
                              one versioned bundle of event definitions, workflow
                              definitions and tenants' subscriptions, checked together;
                              apply and rollback are per tenant and audited
  replay start|list|show|items|cancel --service URL --token JWT ...
                              replay the tenant's history to a queue (DRY_RUN,
                              SIMULATION, PRODUCTION; the service's /v1/replays)
`

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) < 1 {
		fmt.Fprint(stderr, usage)
		return fmt.Errorf("missing command")
	}
	switch args[0] {
	case "topology":
		return runTopology(ctx, args[1:], getenv, stdout)
	case "catalog":
		return runCatalog(ctx, args[1:], stdout, stderr)
	case "dlq":
		return runDLQ(ctx, args[1:], getenv, stdout, stderr)
	case "token":
		return runToken(args[1:], stdout)
	case "explain":
		return runExplain(ctx, args[1:], getenv, stdout, stderr)
	case "subscription":
		return runSubscription(ctx, args[1:], getenv, stdout, stderr)
	case "release":
		return runRelease(ctx, args[1:], getenv, stdout, stderr)
	case "replay":
		return runReplay(ctx, args[1:], getenv, stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	fmt.Fprint(stderr, usage)
	return fmt.Errorf("unknown command %q", args[0])
}

func amqpURL(getenv func(string) string) string {
	if u := getenv("AMQP_URL"); u != "" {
		return u
	}
	return "amqp://guest:guest@127.0.0.1:5672/" // local-development default
}
