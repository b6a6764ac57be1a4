// Package topic is AMQP topic matching, as a topic exchange routes: the
// one copy the catalog (which queues a type reaches) and the topology
// (bindings, lanes, replay targets) both use.
package topic

import "strings"

// Match reports whether a topic exchange routes key to a binding of
// pattern ("*" one word, "#" zero or more).
func Match(pattern, key string) bool {
	return match(strings.Split(pattern, "."), strings.Split(key, "."))
}

func match(p, k []string) bool {
	if len(p) == 0 {
		return len(k) == 0
	}
	switch p[0] {
	case "#":
		for i := 0; i <= len(k); i++ {
			if match(p[1:], k[i:]) {
				return true
			}
		}
		return false
	case "*":
		return len(k) > 0 && match(p[1:], k[1:])
	}
	return len(k) > 0 && p[0] == k[0] && match(p[1:], k[1:])
}
