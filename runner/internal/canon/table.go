package canon

// The handle table of one activation's host resources.

// Table is one activation's handle table: typed entries, index 0 never
// valid, freed indices reused, at most max live entries.
type Table struct {
	entries []entry
	free    []uint32
	live    int
	max     int
}

type entry struct {
	rep      any
	resource uint32
	lends    int
	used     bool
}

// NewTable makes a table of at most max live handles.
func NewTable(max int) *Table { return &Table{entries: make([]entry, 1, 16), max: max} }

// Add stores rep, a resource of type resource, and returns its handle.
func (t *Table) Add(resource uint32, rep any) (uint32, error) {
	if t.live >= t.max {
		return 0, trap("handle table full (%d live handles)", t.max)
	}
	t.live++
	e := entry{rep: rep, resource: resource, used: true}
	if n := len(t.free); n > 0 {
		h := t.free[n-1]
		t.free = t.free[:n-1]
		t.entries[h] = e
		return h, nil
	}
	t.entries = append(t.entries, e)
	return uint32(len(t.entries) - 1), nil
}

func (t *Table) lookup(h, resource uint32) (*entry, error) {
	if h == 0 || int64(h) >= int64(len(t.entries)) || !t.entries[h].used {
		return nil, trap("handle %d is not a live handle", h)
	}
	e := &t.entries[h]
	if e.resource != resource {
		return nil, trap("handle %d is of another resource type", h)
	}
	return e, nil
}

// Get returns the rep of live handle h, which must be of type resource.
func (t *Table) Get(h, resource uint32) (any, error) {
	e, err := t.lookup(h, resource)
	if err != nil {
		return nil, err
	}
	return e.rep, nil
}

// Remove removes own handle h of type resource and returns its rep.
func (t *Table) Remove(h, resource uint32) (any, error) {
	e, err := t.lookup(h, resource)
	if err != nil {
		return nil, err
	}
	if e.lends > 0 {
		return nil, trap("handle %d is lent out", h)
	}
	rep := e.rep
	*e = entry{}
	t.free = append(t.free, h)
	t.live--
	return rep, nil
}

// Lend and Unlend count a loan of h: a lent handle cannot be removed.
func (t *Table) Lend(h, resource uint32) error {
	e, err := t.lookup(h, resource)
	if err == nil {
		e.lends++
	}
	return err
}

// Unlend ends a loan of h.
func (t *Table) Unlend(h uint32) {
	if h > 0 && int64(h) < int64(len(t.entries)) && t.entries[h].lends > 0 {
		t.entries[h].lends--
	}
}

// Len is the number of live handles.
func (t *Table) Len() int { return t.live }

// Retain removes every live entry keep refuses (loans included: the
// caller knows no call is in progress).
func (t *Table) Retain(keep func(resource uint32, rep any) bool) {
	for i := 1; i < len(t.entries); i++ {
		if e := &t.entries[i]; e.used && !keep(e.resource, e.rep) {
			*e = entry{}
			t.free = append(t.free, uint32(i))
			t.live--
		}
	}
}

// Each calls f for every live entry.
func (t *Table) Each(f func(h, resource uint32, rep any)) {
	for i := 1; i < len(t.entries); i++ {
		if e := t.entries[i]; e.used {
			f(uint32(i), e.resource, e.rep)
		}
	}
}
