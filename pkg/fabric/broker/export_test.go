package broker

// SplitURLs is splitURLs for the package's external tests.
var SplitURLs = splitURLs

// CurrentChannel is the channel the next publish would use (nil when none is open).
func (p *Publisher) CurrentChannel() any {
	p.chMu.Lock()
	defer p.chMu.Unlock()
	if p.cur == nil {
		return nil
	}
	return p.cur.ch
}
