package testutil

// Hammer, which runs a function from many goroutines at once.

import (
	"sync"

	"github.com/cockroachdb/errors"
)

// Hammer runs fn(g, i) from goroutines goroutines, iterations times each
// (g in [0, goroutines), i in [0, iterations)). The goroutines wait at a
// shared barrier until all of them have started, so that they contend from
// the first iteration. A goroutine stops at its first error; Hammer waits
// for all of them and returns their errors combined (nil if there were
// none), each annotated with its goroutine and iteration.
func Hammer(goroutines, iterations int, fn func(g, i int) error) error {
	var (
		ready, done sync.WaitGroup
		start       = make(chan struct{})
		mu          sync.Mutex
		errs        []error
	)
	ready.Add(goroutines)
	for g := range goroutines {
		done.Go(func() {
			ready.Done()
			<-start
			for i := range iterations {
				if err := fn(g, i); err != nil {
					mu.Lock()
					errs = append(errs, errors.Wrapf(err, "goroutine %d, iteration %d", g, i))
					mu.Unlock()
					return
				}
			}
		})
	}
	ready.Wait()
	close(start)
	done.Wait()
	return errors.Join(errs...)
}
