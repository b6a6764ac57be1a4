// Command idlecost measures what the platform `make up` started costs at rest:
// after a settle time it sums, over a window, the CPU time (utime + stime of
// /proc/<pid>/stat, children excluded) of every process of the platform, and
// prints it per component and in total as a percentage of one core.
//
//	go run ./deploy/cmd/idlecost                        # settle 60 s, then measure 60 s
//	go run ./deploy/cmd/idlecost -settle 0 -window 30s  # measure at once
//	make idle-cost                                      # the same, IDLE_SETTLE / IDLE_WINDOW
//
// The processes are found by name, never by load: the seven services and the
// SMTP sink by their pidfiles in .data/run (checked against the binary in
// bin/), RabbitMQ as beam.smp with its epmd and port helpers, PostgreSQL as
// the postmaster with its auxiliary processes and the backends of the
// platform's database (other databases' backends belong to tests and are
// left out, and said so), MinIO as minio. A missing component fails the run:
// a total without it would look better than it is.
//
// It samples every process each second, so a backend that ends within the
// window still counts what it used up to its last sample; processes are told
// apart by pid and start time, so a reused pid is not mistaken for the old one.
// RabbitMQ and the PostgreSQL server are the machine's own and may serve
// tests meanwhile: their figure is an upper bound of the platform's share.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// serviceNames are the seven services make up starts (deploy/local/up.sh),
// each with a pidfile.
func serviceNames() []string {
	return []string{"request", "workflow", "communication", "document-worker", "ai-builder", "datalake-ingestion", "analytics"}
}

// processNames are what make up starts: the services and the SMTP sink.
func processNames() []string { return append(serviceNames(), "smtpsink") }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "idlecost:", err)
		os.Exit(1)
	}
}

type config struct {
	settle, window, every time.Duration
	root, procDir, pgDB   string
	mgmt, vhost           string
	verbose               bool
}

func run(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("idlecost", flag.ContinueOnError)
	var c config
	fs.DurationVar(&c.settle, "settle", 60*time.Second, "quiet time before the window (the platform settles after make up or the last request)")
	fs.DurationVar(&c.window, "window", 60*time.Second, "how long CPU time is summed")
	fs.DurationVar(&c.every, "every", time.Second, "how often every process is sampled (catches backends that end within the window)")
	fs.StringVar(&c.root, "root", ".", "the repository make up ran in (its .data/run holds the services' pidfiles)")
	fs.StringVar(&c.procDir, "proc", "/proc", "procfs mount")
	fs.StringVar(&c.pgDB, "db", "agora", "the platform's PostgreSQL database: only its backends count")
	fs.StringVar(&c.mgmt, "mgmt", "http://guest:guest@127.0.0.1:15672", "RabbitMQ's management API, asked which vhosts have connections (empty: do not ask)")
	fs.StringVar(&c.vhost, "vhost", "agora", "the platform's RabbitMQ vhost")
	fs.BoolVar(&c.verbose, "v", false, "print every process and its CPU time")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if c.window <= 0 || c.every <= 0 {
		return errors.New("-window and -every must be positive")
	}
	tick, err := clockTicks()
	if err != nil {
		return err
	}
	// Fail before the settle time if something is missing already.
	procs, err := c.find()
	if err != nil {
		return err
	}
	describe(out, procs)
	if c.settle > 0 {
		fmt.Fprintf(out, "settling %s (nothing should be sent to the platform meanwhile)\n", c.settle)
		if !sleep(ctx, c.settle) {
			return ctx.Err()
		}
	}
	fmt.Fprintf(out, "measuring %s\n", c.window)
	m, err := c.measure(ctx)
	if err != nil {
		return err
	}
	m.report(out, tick, c.verbose)
	if others, err := c.otherConnections(ctx); err != nil {
		fmt.Fprintf(out, "note: could not ask RabbitMQ which vhosts it serves: %v\n", err)
	} else if others > 0 {
		fmt.Fprintf(out, "note: RabbitMQ also serves %d connections outside vhost %s (tests?): its figure is not the platform's alone\n", others, c.vhost)
	}
	return nil
}

// proc is one process of the platform.
type proc struct {
	pid       int
	ppid      int
	start     uint64 // start time in ticks since boot: with pid, the process's identity
	component string // request, ..., rabbitmq, postgres, minio
	detail    string // what it is within the component (a backend's role, an auxiliary's name)
	ticks     uint64 // utime + stime
}

type key struct {
	pid   int
	start uint64
}

// find lists the platform's processes now and fails naming every missing
// component.
func (c config) find() ([]proc, error) {
	all, err := c.scan()
	if err != nil {
		return nil, err
	}
	var out []proc
	var missing []string
	for _, s := range processNames() {
		p, err := c.service(s, all)
		if err != nil {
			missing = append(missing, err.Error())
			continue
		}
		out = append(out, p)
	}
	// RabbitMQ's node is the beam.smp that boots rabbit; other beam.smp
	// processes are rabbitmqctl and friends, which tests run. Its port
	// helpers are its children.
	broker := map[int]bool{}
	for _, p := range all {
		if p.component == "beam.smp" && strings.Contains(p.detail, "-s rabbit boot") {
			broker[p.pid] = true
		}
	}
	byComponent := map[string]int{}
	for _, p := range all {
		switch p.component {
		case "beam.smp", "erl_child_setup", "inet_gethost":
			if !broker[p.pid] && !broker[p.ppid] && !broker[parent(all, p.ppid)] {
				continue
			}
		}
		if cp, ok := c.classify(p); ok {
			out = append(out, cp)
			byComponent[cp.component]++
		}
	}
	for _, comp := range []string{"rabbitmq", "postgres", "minio"} {
		if byComponent[comp] == 0 {
			missing = append(missing, comp+": no process found ("+map[string]string{
				"rabbitmq": "beam.smp", "postgres": "postgres postmaster", "minio": "minio"}[comp]+")")
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("the platform is not complete (make up, make status):\n  %s", strings.Join(missing, "\n  "))
	}
	return out, nil
}

// parent is pid's parent in all, 0 when unknown.
func parent(all map[key]proc, pid int) int {
	for k, p := range all {
		if k.pid == pid {
			return p.ppid
		}
	}
	return 0
}

// service finds a service by its pidfile and checks that the pid runs the
// service's binary: a stale pidfile of a reused pid must not count something else.
func (c config) service(name string, all map[key]proc) (proc, error) {
	raw, err := os.ReadFile(filepath.Join(c.root, ".data", "run", name+".pid"))
	if err != nil {
		return proc{}, fmt.Errorf("%s: no pidfile: %w", name, err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil {
		return proc{}, fmt.Errorf("%s: pidfile: %w", name, err)
	}
	for k, p := range all {
		if k.pid != pid {
			continue
		}
		if p.component != filepath.Base(name) {
			return proc{}, fmt.Errorf("%s: pid %d runs %q, not bin/%s (stale pidfile?)", name, pid, p.detail, name)
		}
		return p, nil
	}
	return proc{}, fmt.Errorf("%s: pid %d from its pidfile is not running", name, pid)
}

// classify says whether a process belongs to the infrastructure and where.
func (c config) classify(p proc) (proc, bool) {
	comm, cmdline := p.component, p.detail
	switch {
	case comm == "beam.smp" || comm == "epmd" || comm == "erl_child_setup" || comm == "inet_gethost":
		p.component, p.detail = "rabbitmq", comm
		return p, true
	case comm == "minio":
		p.component, p.detail = "minio", comm
		return p, true
	case comm == "postgres":
		title, isChild := strings.CutPrefix(cmdline, "postgres: ")
		if !isChild {
			p.component, p.detail = "postgres", "postmaster"
			return p, true
		}
		// "15/main: role db 127.0.0.1(port) state" for a backend,
		// "15/main: checkpointer" for an auxiliary process.
		if _, rest, ok := strings.Cut(title, ": "); ok {
			title = rest
		}
		f := strings.Fields(title)
		if len(f) >= 3 && strings.Contains(f[2], "(") || len(f) >= 3 && f[2] == "[local]" {
			if f[1] != c.pgDB {
				return p, false
			}
			p.component, p.detail = "postgres", "backend "+f[0]
			return p, true
		}
		p.component, p.detail = "postgres", title
		return p, true
	}
	return p, false
}

// scan reads every process's identity and CPU time. component holds the
// command name and detail the command line until classify or service names them.
func (c config) scan() (map[key]proc, error) {
	entries, err := os.ReadDir(c.procDir)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", c.procDir, err)
	}
	out := map[key]proc{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		p, err := c.stat(pid)
		if err != nil {
			continue // ended meanwhile
		}
		if cmd, err := os.ReadFile(filepath.Join(c.procDir, e.Name(), "cmdline")); err == nil {
			p.detail = strings.TrimSpace(strings.ReplaceAll(string(cmd), "\x00", " "))
		}
		if exe, err := os.Readlink(filepath.Join(c.procDir, e.Name(), "exe")); err == nil && slices.Contains(processNames(), filepath.Base(exe)) {
			// A Go binary's comm is cut at 15 characters
			// (datalake-ingest): the executable names the service.
			p.component = filepath.Base(exe)
		}
		out[key{pid, p.start}] = p
	}
	return out, nil
}

// stat parses /proc/<pid>/stat: comm is in parentheses and may hold spaces.
func (c config) stat(pid int) (proc, error) {
	raw, err := os.ReadFile(filepath.Join(c.procDir, strconv.Itoa(pid), "stat"))
	if err != nil {
		return proc{}, err
	}
	s := string(raw)
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || end < open {
		return proc{}, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	// Fields after comm, numbered from 3 (state) as in proc(5).
	f := strings.Fields(s[end+1:])
	if len(f) < 20 {
		return proc{}, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	field := func(n int) (uint64, error) { return strconv.ParseUint(f[n-3], 10, 64) }
	ppid, err0 := strconv.Atoi(f[4-3])
	utime, err1 := field(14)
	stime, err2 := field(15)
	start, err3 := field(22)
	if err := errors.Join(err0, err1, err2, err3); err != nil {
		return proc{}, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	return proc{pid: pid, ppid: ppid, start: start, component: s[open+1 : end], ticks: utime + stime}, nil
}

// measurement is the CPU time each process used within the window.
type measurement struct {
	window time.Duration
	used   map[key]proc // ticks: used within the window
	ended  int          // processes that ended within the window
	born   int          // processes that started within it
}

func (c config) measure(ctx context.Context) (measurement, error) {
	first, err := c.find()
	if err != nil {
		return measurement{}, err
	}
	base := map[key]uint64{}
	last := map[key]proc{}
	for _, p := range first {
		base[key{p.pid, p.start}] = p.ticks
		last[key{p.pid, p.start}] = p
	}
	t0 := time.Now()
	deadline := t0.Add(c.window)
	for {
		wait := min(c.every, time.Until(deadline))
		if wait > 0 && !sleep(ctx, wait) {
			return measurement{}, ctx.Err()
		}
		now, err := c.find()
		if err != nil {
			return measurement{}, fmt.Errorf("within the window: %w", err)
		}
		for _, p := range now {
			last[key{p.pid, p.start}] = p
		}
		if !time.Now().Before(deadline) {
			break
		}
	}
	m := measurement{window: time.Since(t0), used: map[key]proc{}}
	alive := map[key]bool{}
	if now, err := c.find(); err == nil {
		for _, p := range now {
			alive[key{p.pid, p.start}] = true
		}
	}
	for k, p := range last {
		b, seen := base[k]
		if !seen {
			m.born++ // all its CPU time is within the window
		}
		if !alive[k] {
			m.ended++
		}
		p.ticks -= b
		m.used[k] = p
	}
	return m, nil
}

func (m measurement) report(out io.Writer, tick uint64, verbose bool) {
	pct := func(ticks uint64) float64 {
		return float64(ticks) / float64(tick) / m.window.Seconds() * 100
	}
	sum := map[string]uint64{}
	count := map[string]int{}
	var total uint64
	for _, p := range m.used {
		sum[p.component] += p.ticks
		count[p.component]++
		total += p.ticks
	}
	order := append(processNames(), "rabbitmq", "postgres", "minio")
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(w, "component\tprocesses\tCPU s\t%% of one core\t\n")
	var svc uint64
	for _, c := range order {
		fmt.Fprintf(w, "%s\t%d\t%.2f\t%.2f\t\n", c, count[c], float64(sum[c])/float64(tick), pct(sum[c]))
		if slices.Contains(processNames(), c) {
			svc += sum[c]
		}
	}
	fmt.Fprintf(w, "services + smtpsink\t\t%.2f\t%.2f\t\n", float64(svc)/float64(tick), pct(svc))
	fmt.Fprintf(w, "total\t%d\t%.2f\t%.2f\t\n", len(m.used), float64(total)/float64(tick), pct(total))
	w.Flush()
	fmt.Fprintf(out, "window %.1f s; %d processes started and %d ended within it; CPU time of each process, children excluded\n",
		m.window.Seconds(), m.born, m.ended)
	if verbose {
		ps := make([]proc, 0, len(m.used))
		for _, p := range m.used {
			ps = append(ps, p)
		}
		slices.SortFunc(ps, func(a, b proc) int { return int(b.ticks) - int(a.ticks) })
		w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
		for _, p := range ps {
			fmt.Fprintf(w, "  %d\t%s\t%s\t%.2f%%\n", p.pid, p.component, p.detail, pct(p.ticks))
		}
		w.Flush()
	}
}

// otherConnections counts the broker's connections to other vhosts than
// the platform's: the broker's CPU time is then not the platform's alone.
func (c config) otherConnections(ctx context.Context) (int, error) {
	if c.mgmt == "" {
		return 0, nil
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(c.mgmt, "/")+"/api/connections?columns=vhost", nil)
	if err != nil {
		return 0, fmt.Errorf("management API: %w", err)
	}
	if u := req.URL.User; u != nil {
		pass, _ := u.Password()
		req.SetBasicAuth(u.Username(), pass)
		req.URL.User = nil
	}
	client := http.Client{Timeout: 10 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("management API: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("management API: %s", resp.Status)
	}
	var conns []struct {
		Vhost string `json:"vhost"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&conns); err != nil {
		return 0, fmt.Errorf("management API: %w", err)
	}
	n := 0
	for _, cn := range conns {
		if cn.Vhost != c.vhost {
			n++
		}
	}
	return n, nil
}

// describe says what was found, so a wrong match shows before the wait.
func describe(out io.Writer, procs []proc) {
	found := map[string][]string{}
	for _, p := range procs {
		found[p.component] = append(found[p.component], strconv.Itoa(p.pid))
	}
	comps := make([]string, 0, len(found))
	for c := range found {
		comps = append(comps, c)
	}
	slices.Sort(comps)
	for _, c := range comps {
		pids := found[c]
		if len(pids) > 6 {
			pids = append(pids[:6:6], fmt.Sprintf("… (%d)", len(found[c])))
		}
		fmt.Fprintf(out, "found %-20s pid %s\n", c, strings.Join(pids, " "))
	}
}

// clockTicks is the unit of /proc/<pid>/stat's times (sysconf(_SC_CLK_TCK),
// 100 on every Linux this runs on; getconf asks without cgo).
func clockTicks() (uint64, error) {
	out, err := exec.Command("getconf", "CLK_TCK").Output()
	if err != nil {
		return 100, nil
	}
	n, err := strconv.ParseUint(strings.TrimSpace(string(out)), 10, 64)
	if err != nil || n == 0 {
		return 0, fmt.Errorf("getconf CLK_TCK: %q", out)
	}
	return n, nil
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
