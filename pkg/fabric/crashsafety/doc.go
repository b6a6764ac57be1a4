// Package crashsafety holds the fabric's crash-safety suite (tests only):
// producers, relays and consumers run as child processes that die at
// deterministic fault points, and the suite proves by id-set equality that
// every committed event had exactly one effect per consumer.
package crashsafety
