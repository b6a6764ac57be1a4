package harness

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"time"

	"github.com/agora-platform/agora/e2e/testinfra"
)

// infra reads E2E_INFRA. Unset (or "machine"): the machine's services, as
// the environment locates them. "containers": RabbitMQ, PostgreSQL with
// pgvector and MinIO are started as containers from the local stand-in
// images (RABBITMQ_IMAGE, POSTGRES_IMAGE, MINIO_IMAGE, by default those
// deploy/docker/local/local.env names), the process environment is pointed
// at them (AMQP_HOST, RABBITMQ_MGMT_URL, DATABASE_URL, S3_* …, which New
// reads), and stop removes them. E2E_INFRA_RUN, if set, labels them
// (testinfra.LabelRun; default random), so a wrapper can remove them even
// if the test binary dies first. No engine or no image is an error: the
// run fails, it does not fall back to the machine's services.
func infra(getenv func(string) string) (stop func(), err error) {
	switch mode := getenv("E2E_INFRA"); mode {
	case "", "machine":
		return func() {}, nil
	case "containers":
	default:
		return nil, fmt.Errorf("E2E_INFRA=%q: want machine (the default) or containers", mode)
	}
	if getenv("E2E_TARGET") == "compose" {
		return nil, errors.New("E2E_INFRA=containers and E2E_TARGET=compose: the compose stack brings its own infrastructure; set one of them")
	}
	images, err := testinfra.ImagesFrom(getenv)
	if err != nil {
		return nil, fmt.Errorf("E2E_INFRA=containers: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*testinfra.StartTimeout)
	defer cancel()
	t0 := time.Now()
	in, err := testinfra.Start(ctx, images, getenv("E2E_INFRA_RUN"))
	if err != nil {
		return nil, fmt.Errorf("E2E_INFRA=containers: %w", err)
	}
	stop = func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := in.Terminate(ctx); err != nil {
			fmt.Fprintf(os.Stderr, "harness: E2E_INFRA=containers: %v (remove leftovers: go run ./e2e/cmd/testinfra down -run %s)\n", err, in.Run)
		}
	}
	if err := in.Setenv(); err != nil {
		stop()
		return nil, err
	}
	fmt.Fprintf(os.Stderr, "harness: E2E_INFRA=containers: run %s up in %.1f s: AMQP %s, management %s, PostgreSQL %s, MinIO %s\n",
		in.Run, time.Since(t0).Seconds(), in.Env["AMQP_HOST"], in.Env["RABBITMQ_MGMT_URL"],
		redacted(in.Env["DATABASE_URL"]), in.Env["S3_ENDPOINT"])
	return stop, nil
}

func redacted(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "?"
	}
	return u.Redacted()
}
