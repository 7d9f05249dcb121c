// Package methods covers annotated methods: pointer and value receivers,
// two methods of one type, and two receiver types (G3: methods take
// their receiver value; RegisterAll takes each receiver once).
package methods

import (
	"context"
	"sync/atomic"

	"github.com/simba-go/simba/runtime"
)

// Service has two annotated methods, one with a value receiver.
type Service struct {
	Reports *atomic.Int64
}

// Report is a method with a pointer receiver.
//
//simba:scheduled lease=methods.report rate=20ms
func (s *Service) Report(ctx context.Context, t *runtime.Term) error {
	s.Reports.Add(1)
	return nil
}

// Audit is a method with a value receiver: RegisterAll, which takes a
// *Service for Report, passes *service.
//
//simba:scheduled lease=methods.audit delay=1m
func (s Service) Audit(ctx context.Context, t *runtime.Term) error { return nil }

// HTTPCache is a second receiver type, named with an initialism.
type HTTPCache struct{}

// Purge runs on each partition of the cache.
//
//simba:partitioned group=methods.purge partitions=8 rate=1m step=1s
func (h *HTTPCache) Purge(ctx context.Context, t *runtime.Term, partition int) error { return nil }

// Unannotated methods are left alone.
func (h *HTTPCache) Size() int { return 0 }
