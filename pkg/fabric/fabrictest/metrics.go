package fabrictest

import (
	"bufio"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Counter reads a service's Prometheus endpoint (metricsURL, e.g.
// URL+"/metrics") and returns the sum of the samples of metric name whose
// labels include every pair of labels. A series not exported yet reads 0.
//
// Tests use it as a positive signal that a consumer is done: a handler's
// effect can be committed before its message is acked, and a consumer
// running several handlers at once can finish a later message first, so
// "fabric_consumer_processed_total reached N" is what proves every one of
// N messages was handled and acked.
func Counter(t testing.TB, metricsURL, name string, labels map[string]string) float64 {
	t.Helper()
	client := &http.Client{Timeout: 10 * time.Second}
	resp, err := client.Get(metricsURL)
	if err != nil {
		t.Fatalf("GET %s: %v", metricsURL, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", metricsURL, resp.Status)
	}
	var sum float64
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		series, value, ok := cutLast(line, ' ')
		if !ok {
			continue
		}
		metric, labelText, _ := strings.Cut(series, "{")
		if metric != name || !hasLabels(strings.TrimSuffix(labelText, "}"), labels) {
			continue
		}
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			t.Fatalf("%s: sample %q: %v", metricsURL, line, err)
		}
		sum += v
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("read %s: %v", metricsURL, err)
	}
	return sum
}

// WaitCounter waits until Counter reaches at least want.
func WaitCounter(t testing.TB, timeout time.Duration, metricsURL, name string, labels map[string]string, want float64) {
	t.Helper()
	var got float64
	deadline := time.Now().Add(timeout)
	for {
		if got = Counter(t, metricsURL, name, labels); got >= want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s%v >= %g (at %g)", timeout, name, labels, want, got)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func cutLast(s string, sep byte) (before, after string, ok bool) {
	i := strings.LastIndexByte(s, sep)
	if i < 0 {
		return s, "", false
	}
	return s[:i], s[i+1:], true
}

// hasLabels reports whether the exposition label list text (k="v",…)
// holds every pair of want. Values the fabric uses (queue names, types)
// never contain escaped quotes, so a plain scan is enough.
func hasLabels(text string, want map[string]string) bool {
	have := map[string]string{}
	for text != "" {
		k, rest, ok := strings.Cut(text, `="`)
		if !ok {
			return false
		}
		v, rest, ok := strings.Cut(rest, `"`)
		if !ok {
			return false
		}
		have[strings.TrimPrefix(k, ",")] = v
		text = strings.TrimPrefix(rest, ",")
	}
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}
