package bench

import (
	"bytes"
	"encoding/binary"
	"strconv"
	"strings"
)

// Framing is a store's wire framing, as far as the harness needs it: where
// one request ends and the next begins in what a client writes.
type Framing int

const (
	// FramingNone counts nothing on the wire (etcd's requests are counted by
	// a gRPC interceptor instead: HTTP/2 frames do not map to requests).
	FramingNone Framing = iota
	// FramingRESP is Redis's protocol: each command is one RESP array,
	// whether pipelined or not, on a pub/sub connection too.
	FramingRESP
	// FramingZooKeeper is ZooKeeper's: every packet (the connect request,
	// each operation, each ping) is a 4-byte length and its payload.
	FramingZooKeeper
	// FramingPostgres is PostgreSQL's frontend protocol: a request is a
	// simple Query or a Sync ending a batch of extended-protocol messages
	// (Parse, Bind, Execute…), that is, one round trip.
	FramingPostgres
	// FramingMySQL is MySQL's client protocol: every packet is a 3-byte
	// length, a sequence number and its payload, and a command (a query, a
	// CALL, a prepared statement's execution, a ping) is a packet whose
	// sequence number is 0: one round trip.
	FramingMySQL
)

// requestCounter consumes the bytes written on one connection and returns
// how many requests they completed.
type requestCounter interface {
	feed(p []byte) int
}

// commandNamer is implemented by counters that can tell which commands they
// counted (RESP): names returns those completed since the last call.
type commandNamer interface {
	names() []string
}

func (f Framing) newCounter() requestCounter {
	switch f {
	case FramingRESP:
		return &respCounter{}
	case FramingZooKeeper:
		return &lengthCounter{}
	case FramingPostgres:
		return &pgCounter{}
	case FramingMySQL:
		return &mysqlCounter{}
	}
	return nil
}

// respCounter counts RESP commands: arrays of bulk strings, the only form
// go-redis writes (an inline command, a line without "*", counts as one).
type respCounter struct {
	line  []byte // a header line not yet ended
	elems int    // bulk strings still to come in the current array
	skip  int    // bytes of a bulk string (and its CRLF) still to come

	first bool     // the next bulk string is the command's name
	name  []byte   // the name being read
	want  int      // its length
	done  []string // names completed, until taken
}

func (r *respCounter) names() []string {
	d := r.done
	r.done = nil
	return d
}

func (r *respCounter) feed(p []byte) (n int) {
	for len(p) > 0 {
		if r.skip > 0 {
			k := min(r.skip, len(p))
			if r.want > 0 {
				r.name = append(r.name, p[:min(k, r.want-len(r.name))]...)
				if len(r.name) == r.want {
					r.done = append(r.done, strings.ToUpper(string(r.name)))
					r.name, r.want = r.name[:0], 0
				}
			}
			r.skip -= k
			p = p[k:]
			continue
		}
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			r.line = append(r.line, p...)
			return n
		}
		line := bytes.TrimRight(append(r.line, p[:i+1]...), "\r\n")
		r.line = r.line[:0]
		p = p[i+1:]
		if len(line) == 0 {
			continue
		}
		switch {
		case r.elems == 0 && line[0] == '*':
			n++
			r.elems, _ = strconv.Atoi(string(line[1:]))
			r.first = true
		case r.elems == 0:
			n++ // an inline command
			name, _, _ := strings.Cut(string(line), " ")
			r.done = append(r.done, strings.ToUpper(name))
		case line[0] == '$':
			l, _ := strconv.Atoi(string(line[1:]))
			r.skip = max(l, 0) + 2
			r.elems--
			if r.first && l > 0 && l <= 32 {
				r.want = l
			}
			r.first = false
		default:
			r.elems--
		}
	}
	return n
}

// lengthCounter counts packets framed by a 4-byte big-endian length.
type lengthCounter struct {
	hdr  []byte
	skip int
}

func (l *lengthCounter) feed(p []byte) (n int) {
	for len(p) > 0 {
		if l.skip > 0 {
			k := min(l.skip, len(p))
			l.skip -= k
			p = p[k:]
			continue
		}
		k := min(4-len(l.hdr), len(p))
		l.hdr = append(l.hdr, p[:k]...)
		p = p[k:]
		if len(l.hdr) == 4 {
			l.skip = int(binary.BigEndian.Uint32(l.hdr))
			l.hdr = l.hdr[:0]
			n++
		}
	}
	return n
}

// pgCounter counts PostgreSQL round trips: simple Query ('Q') and Sync
// ('S') messages. A connection starts with untyped messages (SSLRequest,
// GSSENCRequest, then the StartupMessage: a length and a code), then every
// message is a type byte and a length that counts itself.
type pgCounter struct {
	typed bool
	hdr   []byte
	skip  int
}

// The codes of the untyped requests that another untyped message follows.
const (
	pgSSLRequest    = 80877103
	pgGSSENCRequest = 80877104
)

func (c *pgCounter) feed(p []byte) (n int) {
	for len(p) > 0 {
		if c.skip > 0 {
			k := min(c.skip, len(p))
			c.skip -= k
			p = p[k:]
			continue
		}
		want := 8 // untyped: length and code
		if c.typed {
			want = 5 // type and length
		}
		k := min(want-len(c.hdr), len(p))
		c.hdr = append(c.hdr, p[:k]...)
		p = p[k:]
		if len(c.hdr) < want {
			return n
		}
		if c.typed {
			if c.hdr[0] == 'Q' || c.hdr[0] == 'S' {
				n++
			}
			c.skip = int(binary.BigEndian.Uint32(c.hdr[1:])) - 4
		} else {
			code := binary.BigEndian.Uint32(c.hdr[4:])
			c.skip = int(binary.BigEndian.Uint32(c.hdr)) - 8
			c.typed = code != pgSSLRequest && code != pgGSSENCRequest
		}
		c.skip = max(c.skip, 0)
		c.hdr = c.hdr[:0]
	}
	return n
}

// mysqlCounter counts MySQL commands: packets with sequence number 0. A
// packet of 16 MiB − 1 bytes continues in the next, which counts nothing.
type mysqlCounter struct {
	hdr  []byte
	skip int
}

func (c *mysqlCounter) feed(p []byte) (n int) {
	for len(p) > 0 {
		if c.skip > 0 {
			k := min(c.skip, len(p))
			c.skip -= k
			p = p[k:]
			continue
		}
		k := min(4-len(c.hdr), len(p))
		c.hdr = append(c.hdr, p[:k]...)
		p = p[k:]
		if len(c.hdr) < 4 {
			return n
		}
		if c.hdr[3] == 0 {
			n++
		}
		c.skip = int(c.hdr[0]) | int(c.hdr[1])<<8 | int(c.hdr[2])<<16
		c.hdr = c.hdr[:0]
	}
	return n
}
