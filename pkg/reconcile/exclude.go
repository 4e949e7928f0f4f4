package reconcile

// Ownership: a controller that shares its keys with other processes
// (sharding) must be able to stop reconciling a key and know when its last
// Reconcile of it has returned, with no gap in which a worker checked the
// key and had not yet begun. begin does the check and counts the Reconcile
// in one step under the controller's mutex; Exclude marks the key and reads
// that count in one step under the same mutex.

// Exclude stops the controller from starting any Reconcile of req until
// Include(req): a worker that takes req from the queue drops it (Forget,
// no retry). It returns a channel that is closed once no Reconcile of req
// is running: at once if none is, else when the last one returns. After
// the channel is closed no Reconcile of req runs until Include. It never
// blocks, and is safe for concurrent use.
func (c *Controller) Exclude(req Request) <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.excluded == nil {
		c.excluded = make(map[Request]struct{})
	}
	c.excluded[req] = struct{}{}
	done := make(chan struct{})
	if c.inFlight[req] == 0 {
		close(done)
		return done
	}
	if c.idle == nil {
		c.idle = make(map[Request][]chan struct{})
	}
	c.idle[req] = append(c.idle[req], done)
	return done
}

// Include undoes Exclude: req is reconciled again when it is next
// enqueued. It does not enqueue req.
func (c *Controller) Include(req Request) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.excluded, req)
}

// begin reports whether a worker may reconcile req now (not excluded, and
// owned when Options.Owns is set) and, if so, counts the Reconcile as
// running. Every begin that returns true is followed by one end.
func (c *Controller) begin(req Request) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, excluded := c.excluded[req]
	if excluded || c.owns != nil && !c.owns(req) {
		delete(c.eventTimes, req) // the event is dropped with the key
		return false
	}
	if c.inFlight == nil {
		c.inFlight = make(map[Request]int)
	}
	c.inFlight[req]++
	return true
}

// end counts a Reconcile of req as returned, and tells Exclude's waiters
// when it was the last.
func (c *Controller) end(req Request) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.inFlight[req]--; c.inFlight[req] > 0 {
		return
	}
	delete(c.inFlight, req)
	for _, ch := range c.idle[req] {
		close(ch)
	}
	delete(c.idle, req)
}
