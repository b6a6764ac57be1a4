// Package testinfra starts the platform's infrastructure as containers
// (testcontainers-go): RabbitMQ with management, PostgreSQL 15 with
// pgvector and MinIO, from the local stand-in images that `make images`
// builds (deploy/docker/local), each on random ports published on
// 127.0.0.1. Env returns the variables that fabrictest.EnvFrom and the e2e
// harness read (AMQP_HOST, RABBITMQ_MGMT_URL, DATABASE_URL, S3_ENDPOINT …),
// so the same tests run against the containers instead of the machine's
// services, which stay the default.
//
// testcontainers' reaper (Ryuk) is disabled: its image cannot be pulled on
// a machine without registry access. Terminate removes what Start started;
// every container carries the label LabelRun, so a leftover (a test binary
// killed before its cleanup) is removed with Down (`go run
// ./e2e/cmd/testinfra down`).
package testinfra

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/moby/moby/api/types/container"
	mobynet "github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/wait"
)

// Labels on every container Start creates.
const (
	LabelRun  = "agora.testinfra.run"  // the run's id (Infra.Run)
	LabelRole = "agora.testinfra.role" // rabbitmq, postgres or minio
)

// Credentials of the containers: local test instances, nothing else.
const (
	rabbitUser, rabbitPass = "guest", "guest" // the stand-in lets guest in from other hosts
	pgPassword             = "agora-testinfra"
	s3AccessKey            = "agora-dev"        // the harness's local-development default
	s3SecretKey            = "agora-dev-secret" // the harness's local-development default
)

// StartTimeout bounds how long each container may take to report ready.
const StartTimeout = 3 * time.Minute

// Images names the images of the three containers.
type Images struct {
	RabbitMQ, Postgres, MinIO string
}

// ImagesFrom reads RABBITMQ_IMAGE, POSTGRES_IMAGE and MINIO_IMAGE through
// getenv; an unset one defaults to the stand-in that
// deploy/docker/local/local.env names (in the repository of the go.work in
// use).
func ImagesFrom(getenv func(string) string) (Images, error) {
	img := Images{RabbitMQ: getenv("RABBITMQ_IMAGE"), Postgres: getenv("POSTGRES_IMAGE"), MinIO: getenv("MINIO_IMAGE")}
	if img.RabbitMQ != "" && img.Postgres != "" && img.MinIO != "" {
		return img, nil
	}
	local, err := localEnv()
	if err != nil {
		return img, err
	}
	for _, f := range []struct {
		dst *string
		key string
	}{{&img.RabbitMQ, "RABBITMQ_IMAGE"}, {&img.Postgres, "POSTGRES_IMAGE"}, {&img.MinIO, "MINIO_IMAGE"}} {
		if *f.dst == "" {
			if *f.dst = local[f.key]; *f.dst == "" {
				return img, fmt.Errorf("testinfra: %s is neither set nor in deploy/docker/local/local.env", f.key)
			}
		}
	}
	return img, nil
}

// localEnv reads deploy/docker/local/local.env (KEY=VALUE lines).
func localEnv() (map[string]string, error) {
	out, err := exec.Command("go", "env", "GOWORK").Output()
	if err != nil {
		return nil, fmt.Errorf("testinfra: go env GOWORK: %w", err)
	}
	work := strings.TrimSpace(string(out))
	if work == "" || work == "off" {
		return nil, errors.New("testinfra: no go.work in use: set RABBITMQ_IMAGE, POSTGRES_IMAGE and MINIO_IMAGE, or run inside the repository")
	}
	f, err := os.Open(filepath.Join(filepath.Dir(work), "deploy", "docker", "local", "local.env"))
	if err != nil {
		return nil, fmt.Errorf("testinfra: %w", err)
	}
	defer f.Close()
	env := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(line, "#") {
			env[k] = v
		}
	}
	return env, sc.Err()
}

// Infra is a running set of containers.
type Infra struct {
	// Run is the value of LabelRun on its containers.
	Run string
	// Env locates the containers: AMQP_HOST, AMQP_URL, RABBITMQ_MGMT_URL,
	// RABBITMQ_USER, RABBITMQ_PASS, RABBITMQCTL (`docker exec <broker>
	// rabbitmqctl`), DATABASE_URL (the superuser), S3_ENDPOINT,
	// S3_ACCESS_KEY, S3_SECRET_KEY, and TESTINFRA_RUN.
	Env map[string]string

	id         string
	mu         sync.Mutex
	containers []testcontainers.Container
}

// Start starts the three containers (side by side) and returns when each
// reports ready from inside and answers on its published port: RabbitMQ's
// AMQP listener and management API (as guest), PostgreSQL's real server
// (not the init server) with the vector extension available, MinIO's
// readiness endpoint. run labels the containers (LabelRun); empty means a
// random id. A missing engine or image is an error, and so is a reaper
// that could not be disabled. On error nothing Start created is left.
func Start(ctx context.Context, images Images, run string) (*Infra, error) {
	// Before testcontainers reads its configuration (once per process).
	os.Setenv("TESTCONTAINERS_RYUK_DISABLED", "true")
	// Ports are published on 127.0.0.1 of a local engine. Without this,
	// testcontainers, finding /.dockerenv here, waits on the default
	// gateway's address instead.
	os.Setenv("TESTCONTAINERS_HOST_OVERRIDE", "127.0.0.1")
	if !testcontainers.ReadConfig().RyukDisabled {
		return nil, errors.New("testinfra: the reaper (Ryuk) is enabled (configuration read before TESTCONTAINERS_RYUK_DISABLED=true was set?): its image cannot be pulled here")
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	id := hex.EncodeToString(b[:]) // in the containers' names: two Starts may share a run
	if run == "" {
		run = id
	}
	docker, err := testcontainers.NewDockerClientWithOpts(ctx)
	if err != nil {
		return nil, fmt.Errorf("testinfra: docker engine (run `make infra`): %w", err)
	}
	defer docker.Close()
	if _, err := docker.Ping(ctx, client.PingOptions{}); err != nil {
		return nil, fmt.Errorf("testinfra: docker engine (run `make infra`): %w", err)
	}
	for _, img := range []string{images.RabbitMQ, images.Postgres, images.MinIO} {
		if _, err := docker.ImageInspect(ctx, img); err != nil {
			return nil, fmt.Errorf("testinfra: image %s is not on this engine (run `make images`; nothing is pulled): %w", img, err)
		}
	}

	in := &Infra{Run: run, id: id, Env: map[string]string{"TESTINFRA_RUN": run}}
	starts := []func(context.Context) (map[string]string, error){
		func(ctx context.Context) (map[string]string, error) { return in.startRabbit(ctx, images.RabbitMQ) },
		func(ctx context.Context) (map[string]string, error) { return in.startPostgres(ctx, images.Postgres) },
		func(ctx context.Context) (map[string]string, error) { return in.startMinIO(ctx, images.MinIO) },
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for _, start := range starts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			env, err := start(ctx)
			mu.Lock()
			defer mu.Unlock()
			errs = append(errs, err)
			for k, v := range env {
				in.Env[k] = v
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, errors.Join(err, in.Terminate(context.Background()))
	}
	return in, nil
}

// Terminate stops and removes the containers (with their volumes).
func (in *Infra) Terminate(ctx context.Context) error {
	in.mu.Lock()
	cs := in.containers
	in.containers = nil
	in.mu.Unlock()
	var errs []error
	for _, c := range cs {
		if err := c.Terminate(ctx); err != nil {
			errs = append(errs, fmt.Errorf("testinfra: remove %s: %w", c.GetContainerID(), err))
		}
	}
	return errors.Join(errs...)
}

// Setenv sets Env in this process's environment.
func (in *Infra) Setenv() error {
	for k, v := range in.Env {
		if err := os.Setenv(k, v); err != nil {
			return err
		}
	}
	return nil
}

// Down removes every container labelled with run (LabelRun), or with any
// run when run is empty, and their anonymous volumes. It returns their names.
func Down(ctx context.Context, run string) ([]string, error) {
	docker, err := testcontainers.NewDockerClientWithOpts(ctx)
	if err != nil {
		return nil, fmt.Errorf("testinfra: docker engine: %w", err)
	}
	defer docker.Close()
	label := LabelRun
	if run != "" {
		label += "=" + run
	}
	list, err := docker.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: make(client.Filters).Add("label", label)})
	if err != nil {
		return nil, fmt.Errorf("testinfra: list containers: %w", err)
	}
	var names []string
	var errs []error
	for _, c := range list.Items {
		name := strings.TrimPrefix(strings.Join(c.Names, ","), "/")
		if _, err := docker.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true}); err != nil {
			errs = append(errs, fmt.Errorf("testinfra: remove %s: %w", name, err))
			continue
		}
		names = append(names, name)
	}
	return names, errors.Join(errs...)
}

// start runs one container from req, publishing ports on 127.0.0.1 only,
// and records it for Terminate (even when it failed to get ready).
func (in *Infra) start(ctx context.Context, role string, req testcontainers.ContainerRequest) (testcontainers.Container, error) {
	req.Name = in.name(role)
	req.Labels = map[string]string{LabelRun: in.Run, LabelRole: role}
	req.HostConfigModifier = func(hc *container.HostConfig) {
		hc.PortBindings = mobynet.PortMap{}
		for _, p := range req.ExposedPorts {
			hc.PortBindings[mobynet.MustParsePort(p)] = []mobynet.PortBinding{{HostIP: netip.MustParseAddr("127.0.0.1")}}
		}
	}
	c, err := testcontainers.GenericContainer(ctx, testcontainers.GenericContainerRequest{ContainerRequest: req, Started: true})
	if c != nil {
		in.mu.Lock()
		in.containers = append(in.containers, c)
		in.mu.Unlock()
	}
	if err != nil {
		return c, fmt.Errorf("testinfra: %s from %s: %w%s", role, req.Image, err, logTail(c))
	}
	return c, nil
}

func (in *Infra) name(role string) string { return "agora-testinfra-" + in.id + "-" + role }

// hostPort is 127.0.0.1:<published port of port>.
func hostPort(ctx context.Context, c testcontainers.Container, port string) (string, error) {
	p, err := c.MappedPort(ctx, port)
	if err != nil {
		return "", fmt.Errorf("testinfra: published port of %s: %w", port, err)
	}
	return "127.0.0.1:" + p.Port(), nil
}

func (in *Infra) startRabbit(ctx context.Context, image string) (map[string]string, error) {
	c, err := in.start(ctx, "rabbitmq", testcontainers.ContainerRequest{
		Image:        image,
		ExposedPorts: []string{"5672/tcp", "15672/tcp"},
		WaitingFor: wait.ForAll(
			// The node runs and its AMQP listener is up (the CLI reads the
			// cookie the server wrote in $HOME) …
			wait.ForExec([]string{"rabbitmq-diagnostics", "-q", "check_port_listener", "5672"}).WithPollInterval(time.Second),
			// … both published ports answer from here, the management API
			// with the credentials fabrictest uses.
			wait.ForListeningPort("5672/tcp").SkipInternalCheck(),
			wait.ForHTTP("/api/overview").WithPort("15672/tcp").WithBasicAuth(rabbitUser, rabbitPass).
				WithForcedIPv4LocalHost().WithPollInterval(500*time.Millisecond),
		).WithStartupTimeoutDefault(StartTimeout).WithDeadline(StartTimeout),
	})
	if err != nil {
		return nil, err
	}
	amqpAddr, err := hostPort(ctx, c, "5672/tcp")
	if err != nil {
		return nil, err
	}
	mgmt, err := hostPort(ctx, c, "15672/tcp")
	if err != nil {
		return nil, err
	}
	return map[string]string{
		"AMQP_HOST":         amqpAddr,
		"AMQP_URL":          fmt.Sprintf("amqp://%s:%s@%s/", rabbitUser, rabbitPass, amqpAddr),
		"RABBITMQ_MGMT_URL": "http://" + mgmt,
		"RABBITMQ_USER":     rabbitUser,
		"RABBITMQ_PASS":     rabbitPass,
		"RABBITMQCTL":       "docker exec " + in.name("rabbitmq") + " rabbitmqctl",
	}, nil
}

func (in *Infra) startPostgres(ctx context.Context, image string) (map[string]string, error) {
	c, err := in.start(ctx, "postgres", testcontainers.ContainerRequest{
		Image:        image,
		ExposedPorts: []string{"5432/tcp"},
		// trust, as the machine's PostgreSQL (`make infra`): some fabric
		// tests log in as roles they create without a password.
		Env: map[string]string{"POSTGRES_PASSWORD": pgPassword, "POSTGRES_HOST_AUTH_METHOD": "trust"},
		// The stand-in's init server listens on a private socket only: over
		// TCP, pg_isready answers for the real server.
		WaitingFor: wait.ForAll(
			wait.ForExec([]string{"pg_isready", "-q", "-h", "127.0.0.1", "-U", "postgres"}).WithPollInterval(500*time.Millisecond),
			wait.ForListeningPort("5432/tcp").SkipInternalCheck(),
		).WithStartupTimeoutDefault(StartTimeout).WithDeadline(StartTimeout),
	})
	if err != nil {
		return nil, err
	}
	addr, err := hostPort(ctx, c, "5432/tcp")
	if err != nil {
		return nil, err
	}
	u := (&url.URL{Scheme: "postgres", User: url.UserPassword("postgres", pgPassword), Host: addr,
		Path: "/postgres", RawQuery: "sslmode=disable"}).String()
	// From here, as the tests will connect: the superuser logs in, and
	// pgvector is installed (the harness creates the extension).
	var vector bool
	err = retry(ctx, 30*time.Second, func() error {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		conn, err := pgx.Connect(cctx, u)
		if err != nil {
			return err
		}
		defer conn.Close(context.Background())
		return conn.QueryRow(cctx, `SELECT EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'vector')`).Scan(&vector)
	})
	if err != nil {
		return nil, fmt.Errorf("testinfra: postgres at %s: %w%s", addr, err, logTail(c))
	}
	if !vector {
		return nil, fmt.Errorf("testinfra: %s has no pgvector (extension vector not available)", image)
	}
	return map[string]string{"DATABASE_URL": u}, nil
}

func (in *Infra) startMinIO(ctx context.Context, image string) (map[string]string, error) {
	c, err := in.start(ctx, "minio", testcontainers.ContainerRequest{
		Image:        image,
		Cmd:          []string{"server", "/data"},
		ExposedPorts: []string{"9000/tcp"},
		Env:          map[string]string{"MINIO_ROOT_USER": s3AccessKey, "MINIO_ROOT_PASSWORD": s3SecretKey},
		WaitingFor: wait.ForHTTP("/minio/health/ready").WithPort("9000/tcp").
			WithForcedIPv4LocalHost().WithPollInterval(500 * time.Millisecond).WithStartupTimeout(StartTimeout),
	})
	if err != nil {
		return nil, err
	}
	addr, err := hostPort(ctx, c, "9000/tcp")
	if err != nil {
		return nil, err
	}
	return map[string]string{"S3_ENDPOINT": addr, "S3_ACCESS_KEY": s3AccessKey, "S3_SECRET_KEY": s3SecretKey}, nil
}

func retry(ctx context.Context, timeout time.Duration, f func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return errors.Join(err, ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// logTail is the end of c's log, for an error message.
func logTail(c testcontainers.Container) string {
	if c == nil {
		return ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := c.Logs(ctx)
	if err != nil {
		return ""
	}
	defer r.Close()
	data, _ := io.ReadAll(r)
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > 30 {
		lines = lines[len(lines)-30:]
	}
	return "\n--- container log (last lines) ---\n" + strings.Join(lines, "\n")
}
