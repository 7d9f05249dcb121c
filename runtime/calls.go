package runtime

import (
	"context"
	"fmt"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/runtime/internal/engine"
)

// call performs one backend request on a goroutine of its own, bounded by
// the request's timeout (D2), and hands the reply to the core.
func (c *Client) call(req engine.Request, s backends.Session) {
	defer c.wg.Done()
	ctx, cancel := context.WithTimeout(context.Background(), req.Timeout)
	defer cancel()
	var res engine.Result
	var opened backends.Session
	switch req.Kind {
	case engine.ReqOpen:
		opened, res.Renewal, res.Err = c.backend.OpenSession(ctx, backends.SessionOptions{TTL: req.TTL, Identity: c.identity})
		if res.Err == nil {
			res.Session = opened.ID()
		}
	case engine.ReqKeepAlive:
		res.Renewal, res.Err = s.KeepAlive(ctx)
	case engine.ReqOwned:
		res.Held, res.Digest, res.Err = s.Owned(ctx)
	case engine.ReqAcquire:
		res.Grant, res.Err = s.Acquire(ctx, req.Name)
	case engine.ReqRelease:
		res.Digest, res.Err = s.Release(ctx, req.Name, req.Token)
	case engine.ReqClose:
		res.Err = s.Close(ctx)
	case engine.ReqPutValue:
		res.Err = s.PutValue(ctx, req.Name, req.Token, req.Value)
	case engine.ReqJoin:
		res.Err = s.Join(ctx, req.Group, req.N)
	case engine.ReqLeave:
		res.Err = s.Leave(ctx, req.Group)
	case engine.ReqMembers:
		res.View, res.Err = s.Members(ctx, req.Group)
	case engine.ReqStoreTime:
		if sc, ok := c.backend.(backends.StoreClock); ok {
			res.StoreTime, res.Err = sc.StoreTime(ctx)
		} else {
			res.Err = fmt.Errorf("simba: the backend (%T) has no store clock", c.backend)
		}
	}
	c.apply(func(now mono) {
		switch {
		case opened != nil:
			c.sessions[req.Gen] = opened
		case req.Kind == engine.ReqClose:
			for _, stop := range c.watches[req.Gen] {
				stop()
			}
			delete(c.watches, req.Gen)
			delete(c.sessions, req.Gen)
			delete(c.deadlines, req.Gen)
		}
		c.m.Step(now, engine.Reply{ID: req.ID, Result: res})
	})
}
