package fabrictest

import (
	"bytes"
	"runtime"
)

// GoroutinesIn returns how many goroutines have the function fn (as the
// runtime names it, e.g. "relay.(*Relay).listen") on their stack. A test
// calls it right after a Run returned to prove the helpers it started
// have ended: no waiting, since Run must not return before they have.
func GoroutinesIn(fn string) int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	frame := []byte(fn + "(")
	count := 0
	for _, g := range bytes.Split(buf, []byte("\n\n")) {
		if bytes.Contains(g, frame) {
			count++
		}
	}
	return count
}
