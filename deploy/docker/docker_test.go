// Package docker_test checks the shared service Dockerfile without a Docker
// engine: its structure (stages, non-root user, health check, static build)
// and that the binaries it builds really are static when built the same way.
package docker_test

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
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
	// whose defaults are pinned public images.
	preamble, _, _ := strings.Cut(df, "\nFROM ")
	args := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^ARG\s+(\w+)=(\S+)\s*$`).FindAllStringSubmatch(preamble, -1) {
		args[m[1]] = m[2]
	}
	stages := regexp.MustCompile(`(?m)^FROM\s+(\S+)\s+AS\s+(\S+)`).FindAllStringSubmatch(df, -1)
	names := map[string]string{}
	for _, s := range stages {
		v := regexp.MustCompile(`^\$\{(\w+)\}$`).FindStringSubmatch(s[1])
		if v == nil || args[v[1]] == "" {
			t.Errorf("stage %s: FROM %s, want FROM ${NAME} with a global ARG NAME=<pinned image>", s[2], s[1])
			continue
		}
		if !pinned(args[v[1]]) {
			t.Errorf("stage %s: default base %s is not pinned", s[2], args[v[1]])
		}
		names[s[2]] = args[v[1]]
	}
	if len(stages) != 3 || names["build"] == "" || names["service"] == "" || names["service-ocr"] == "" {
		t.Fatalf("stages = %v, want build, service-ocr, service", names)
	}
	if last := stages[len(stages)-1][2]; last != "service" {
		t.Errorf("last stage (the default target) is %s, want service", last)
	}
	if !strings.HasPrefix(names["service"], "gcr.io/distroless/static") {
		t.Errorf("runtime base %s, want distroless static", names["service"])
	}
	if !strings.HasPrefix(names["build"], "golang:") || !strings.HasPrefix(names["service-ocr"], "debian:") {
		t.Errorf("build base %s, OCR base %s: want golang and debian", names["build"], names["service-ocr"])
	}
	for _, want := range []string{"CGO_ENABLED=0", "ARG SERVICE", "./deploy/cmd/probe"} {
		if !strings.Contains(df, want) {
			t.Errorf("Dockerfile lacks %q", want)
		}
	}
	// Every runtime stage: non-root user, health check, entrypoint.
	for _, stage := range strings.Split(df, "\nFROM ")[1:] {
		name := strings.Fields(stage)[2]
		if name == "build" {
			continue
		}
		for _, want := range []string{"USER 65532:65532", "HEALTHCHECK ", `CMD ["/usr/local/bin/probe"]`, "ENTRYPOINT ["} {
			if !strings.Contains(stage, want) {
				t.Errorf("stage %s lacks %q", name, want)
			}
		}
	}
	if _, err := os.Stat("service.Dockerfile.dockerignore"); err != nil {
		t.Errorf("build context filter: %v", err)
	}
}

// The image's binaries, built as the Dockerfile builds them, have no ELF
// interpreter and no dynamic section: they run on distroless/static or scratch.
func TestBinariesAreStatic(t *testing.T) {
	out := t.TempDir()
	// A service too: its dependencies (pgx, the S3 client, OpenTelemetry)
	// are what could pull in cgo, not the two small tools.
	for _, pkg := range []string{"./deploy/cmd/probe", "./deploy/cmd/devcerts", "./services/request/cmd/request", "./services/document-worker/cmd/document-worker"} {
		bin := filepath.Join(out, filepath.Base(pkg))
		cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", bin, pkg)
		cmd.Dir = "../.."
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", pkg, err, b)
		}
		f, err := elf.Open(bin)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
				t.Errorf("%s is dynamically linked (%v)", pkg, p.Type)
			}
		}
		f.Close()
		st, _ := os.Stat(bin)
		t.Logf("%s: static, %.1f MiB", pkg, float64(st.Size())/(1<<20))
	}
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
