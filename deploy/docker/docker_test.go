// Package docker_test checks the shared service Dockerfile without a Docker
// engine: its structure (stages, where the binaries come from, non-root user,
// health check), and that the binaries the images run, compiled on the host
// by binaries.sh exactly as the images get them, are static and are every
// binary the compose file's builds name.
package docker_test

import (
	"context"
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/cli"
)

func TestDockerfilePattern(t *testing.T) {
	data, err := os.ReadFile("service.Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	df := string(data)
	// Fetching a frontend image needs a registry; the builder's own frontend suffices.
	if regexp.MustCompile(`(?m)^#\s*syntax\s*=`).MatchString(df) {
		t.Errorf("Dockerfile has a # syntax= line")
	}
	// Bases are global ARGs (a machine without registry access passes stand-ins)
	// whose defaults are pinned public images; BINARIES names the stage the
	// binaries come from.
	preamble, _, _ := strings.Cut(df, "\nFROM ")
	args := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^ARG\s+(\w+)=(\S+)\s*$`).FindAllStringSubmatch(preamble, -1) {
		args[m[1]] = m[2]
	}
	stages := regexp.MustCompile(`(?m)^FROM\s+(\S+)\s+AS\s+(\S+)`).FindAllStringSubmatch(df, -1)
	var order []string
	bases := map[string]string{}
	for _, s := range stages {
		name := s[2]
		order = append(order, name)
		switch name {
		case "prebuilt":
			// Only files: nothing from a registry, no shell.
			if s[1] != "scratch" {
				t.Errorf("stage prebuilt: FROM %s, want scratch", s[1])
			}
			continue
		case "binaries":
			if s[1] != "${BINARIES}" {
				t.Errorf("stage binaries: FROM %s, want FROM ${BINARIES}", s[1])
			}
			continue
		}
		v := regexp.MustCompile(`^\$\{(\w+)\}$`).FindStringSubmatch(s[1])
		if v == nil || args[v[1]] == "" {
			t.Errorf("stage %s: FROM %s, want FROM ${NAME} with a global ARG NAME=<pinned image>", name, s[1])
			continue
		}
		if !pinned(args[v[1]]) {
			t.Errorf("stage %s: default base %s is not pinned", name, args[v[1]])
		}
		bases[name] = args[v[1]]
	}
	if want := []string{"build", "prebuilt", "binaries", "service-ocr", "service"}; !slices.Equal(order, want) {
		t.Fatalf("stages %v, want %v (the last, service, is the default target)", order, want)
	}
	// The published pattern needs nothing but the tree: it compiles unless told otherwise.
	if args["BINARIES"] != "build" {
		t.Errorf("ARG BINARIES=%q, want the default build (compile in the Go image)", args["BINARIES"])
	}
	if !strings.HasPrefix(bases["service"], "gcr.io/distroless/static") {
		t.Errorf("runtime base %s, want distroless static", bases["service"])
	}
	if !strings.HasPrefix(bases["build"], "golang:") || !strings.HasPrefix(bases["service-ocr"], "debian:") {
		t.Errorf("build base %s, OCR base %s: want golang and debian", bases["build"], bases["service-ocr"])
	}
	for _, want := range []string{"CGO_ENABLED=0", "GOFLAGS=-trimpath", `-ldflags="-s -w"`, "ARG SERVICE", "./deploy/cmd/probe"} {
		if !strings.Contains(stage(df, "build"), want) {
			t.Errorf("build stage lacks %q", want)
		}
	}
	// prebuilt copies the two files binaries.sh writes, and nothing else.
	var copied []string
	for _, m := range regexp.MustCompile(`(?m)^(COPY|ADD|RUN)\s+(.*)$`).FindAllStringSubmatch(stage(df, "prebuilt"), -1) {
		copied = append(copied, m[1]+" "+m[2])
	}
	if want := []string{"COPY .data/bin/images/${SERVICE} /out/app", "COPY .data/bin/images/probe /out/probe"}; !slices.Equal(copied, want) {
		t.Errorf("prebuilt stage does %q, want %q", copied, want)
	}
	// Every runtime stage: its binaries from the chosen stage, non-root user, health check, entrypoint.
	for _, name := range []string{"service-ocr", "service"} {
		st := stage(df, name)
		for _, want := range []string{"COPY --from=binaries /out/app /usr/local/bin/service", "COPY --from=binaries /out/probe /usr/local/bin/probe",
			"USER 65532:65532", "HEALTHCHECK ", `CMD ["/usr/local/bin/probe"]`, `ENTRYPOINT ["/usr/local/bin/service"]`} {
			if !strings.Contains(st, want) {
				t.Errorf("stage %s lacks %q", name, want)
			}
		}
		if strings.Contains(st, "--from=build") || strings.Contains(st, "--from=prebuilt") {
			t.Errorf("stage %s copies from build or prebuilt directly, not from the chosen stage (binaries)", name)
		}
		// The last instruction that sets the user leaves it non-root.
		if users := regexp.MustCompile(`(?m)^USER\s+(\S+)`).FindAllStringSubmatch(st, -1); len(users) == 0 || users[len(users)-1][1] != "65532:65532" {
			t.Errorf("stage %s: USER %v, want 65532:65532 last", name, users)
		}
	}

	// The build context leaves .data out but for the binaries binaries.sh writes there.
	ignore, err := os.ReadFile("service.Dockerfile.dockerignore")
	if err != nil {
		t.Fatalf("build context filter: %v", err)
	}
	lines := strings.Fields(string(regexp.MustCompile(`(?m)^#.*$`).ReplaceAll(ignore, nil)))
	if i, j := slices.Index(lines, ".data"), slices.Index(lines, "!.data/bin/images"); i < 0 || j < i {
		t.Errorf("dockerignore %q: want .data, then !.data/bin/images", lines)
	}
	script, err := os.ReadFile("binaries.sh")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(script), "out=${1:-$root/.data/bin/images}") {
		t.Errorf("binaries.sh does not write to .data/bin/images by default, where the prebuilt stage copies from")
	}
}

// stage returns the text of the Dockerfile's stage name, from its FROM line to the next.
func stage(df, name string) string {
	for _, s := range strings.Split(df, "\nFROM ")[1:] {
		if f := strings.Fields(s); len(f) >= 3 && f[2] == name {
			return s
		}
	}
	return ""
}

// The images' binaries as binaries.sh compiles them on the host (the prebuilt stage copies
// them): one for every build of the compose file, plus the probe; none with an ELF
// interpreter or a dynamic section, so they run on distroless/static or scratch. The
// services are what could pull in cgo (pgx, the S3 client, OpenTelemetry), not the tools.
// They are built where the images take them from, .data/bin/images: the binaries checked
// here are the ones the next `make compose-up` or `make compose-test` ships, and its go build
// finds them up to date.
func TestBinariesAreStatic(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	listed, err := exec.Command("bash", "binaries.sh", "--list").Output()
	if err != nil {
		t.Fatalf("binaries.sh --list: %v", err)
	}
	names := strings.Fields(string(listed))
	for _, name := range append([]string{"probe"}, composeBuilds(t)...) {
		if !slices.Contains(names, name) {
			t.Errorf("the compose file builds an image of %s, but binaries.sh does not compile it (it lists %v)", name, names)
		}
	}
	out, err := filepath.Abs(filepath.Join("..", "..", ".data", "bin", "images"))
	if err != nil {
		t.Fatal(err)
	}
	if b, err := exec.Command("bash", "binaries.sh").CombinedOutput(); err != nil {
		t.Fatalf("binaries.sh: %v\n%s", err, b)
	} else {
		t.Logf("%s", b)
	}
	for _, name := range names {
		f, err := elf.Open(filepath.Join(out, name))
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
				t.Errorf("%s is dynamically linked (%v)", name, p.Type)
			}
		}
		if f.Section(".symtab") != nil {
			t.Errorf("%s has a symbol table: not built with -ldflags '-s -w'", name)
		}
		f.Close()
		st, _ := os.Stat(filepath.Join(out, name))
		t.Logf("%s: static, %.1f MiB", name, float64(st.Size())/(1<<20))
	}
}

// composeBuilds returns the SERVICE build argument of every image the compose file builds
// (observability profile included), after checking that a TARGET, where one is given, is a
// command of that name: the file binaries.sh writes for a package is its directory's name.
func composeBuilds(t *testing.T) []string {
	t.Helper()
	wd, err := filepath.Abs("../compose")
	if err != nil {
		t.Fatal(err)
	}
	opts, err := cli.NewProjectOptions([]string{filepath.Join(wd, "docker-compose.yml")},
		cli.WithWorkingDirectory(wd), cli.WithName("agora"), cli.WithProfiles([]string{"observability"}), cli.WithEnv([]string{}))
	if err != nil {
		t.Fatal(err)
	}
	p, err := opts.LoadProject(context.Background())
	if err != nil {
		t.Fatalf("load docker-compose.yml: %v", err)
	}
	var names []string
	for _, s := range p.Services {
		if s.Build == nil {
			continue
		}
		svc := s.Build.Args["SERVICE"]
		if svc == nil || *svc == "" {
			t.Errorf("service %s: build without a SERVICE argument", s.Name)
			continue
		}
		if target := s.Build.Args["TARGET"]; target != nil && filepath.Base(*target) != *svc {
			t.Errorf("service %s: TARGET %s is not a command named %s", s.Name, *target, *svc)
		}
		if !slices.Contains(names, *svc) {
			names = append(names, *svc)
		}
	}
	if len(names) < 7 {
		t.Errorf("the compose file builds %v: fewer than the seven services", names)
	}
	return names
}

// pinned reports whether an image reference names a fixed release: a digest, or a
// tag other than latest (a reference without a tag means latest).
func pinned(ref string) bool {
	if strings.Contains(ref, "@sha256:") {
		return true
	}
	name := ref[strings.LastIndex(ref, "/")+1:]
	i := strings.LastIndex(name, ":")
	return i > 0 && i < len(name)-1 && name[i+1:] != "latest"
}

// The local stand-ins (deploy/docker/local) build from the imported Debian base or
// from scratch only, never from a registry, and their entry points stay executable
// (COPY keeps the mode the container then runs with).
func TestDockerfileLocalStandIns(t *testing.T) {
	dockerfiles, err := filepath.Glob("local/*/Dockerfile")
	if err != nil || len(dockerfiles) < 5 {
		t.Fatalf("local/*/Dockerfile: %v, %v", dockerfiles, err)
	}
	for _, f := range dockerfiles {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		df := string(data)
		if regexp.MustCompile(`(?m)^#\s*syntax\s*=`).MatchString(df) {
			t.Errorf("%s has a # syntax= line", f)
		}
		if !strings.Contains(df, "ARG BASE_IMAGE=agora-local/debian:bookworm\n") {
			t.Errorf("%s: want ARG BASE_IMAGE=agora-local/debian:bookworm", f)
		}
		stages := map[string]bool{}
		for _, m := range regexp.MustCompile(`(?m)^FROM\s+(\S+)(?:\s+AS\s+(\S+))?`).FindAllStringSubmatch(df, -1) {
			if from := m[1]; from != "${BASE_IMAGE}" && from != "scratch" && !stages[from] {
				t.Errorf("%s: FROM %s, want ${BASE_IMAGE}, scratch or an earlier stage", f, from)
			}
			stages[m[2]] = m[2] != ""
		}
	}
	scripts, _ := filepath.Glob("local/*/*.sh")
	scripts = append(scripts, "local/build.sh")
	for _, f := range scripts {
		st, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode()&0o111 == 0 {
			t.Errorf("%s is not executable", f)
		}
	}
}
