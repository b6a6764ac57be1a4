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
	stages := regexp.MustCompile(`(?m)^FROM\s+(\S+)\s+AS\s+(\S+)`).FindAllStringSubmatch(df, -1)
	names := map[string]string{}
	for _, s := range stages {
		names[s[2]] = s[1]
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
	for _, pkg := range []string{"./deploy/cmd/probe", "./deploy/cmd/devcerts"} {
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
