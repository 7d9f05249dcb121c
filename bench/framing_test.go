package bench

import (
	"encoding/binary"
	"strings"
	"testing"
)

// feedSplit feeds p to c one split at a time, at every length from 1 byte
// up, and returns the requests counted.
func feedSplit(c requestCounter, p []byte, step int) int {
	n := 0
	for len(p) > 0 {
		k := min(step, len(p))
		n += c.feed(p[:k])
		p = p[k:]
	}
	return n
}

func TestRESPNames(t *testing.T) {
	in := []byte("*2\r\n$7\r\nevalsha\r\n$1\r\nk\r\nPING\r\n*1\r\n$4\r\nPING\r\n")
	for step := 1; step <= len(in); step++ {
		c := &respCounter{}
		var got []string
		for p := in; len(p) > 0; p = p[min(step, len(p)):] {
			c.feed(p[:min(step, len(p))])
			got = append(got, c.names()...)
		}
		if strings.Join(got, " ") != "EVALSHA PING PING" {
			t.Fatalf("written %d bytes at a time: names %q; want EVALSHA PING PING", step, got)
		}
	}
}

func TestCounters(t *testing.T) {
	resp := []byte("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$6\r\nv\r\n*\r\n\r\n" + // a value holding CRLF and '*'
		"*2\r\n$3\r\nDEL\r\n$1\r\nk\r\n" +
		"PING\r\n" + // inline
		"*1\r\n$4\r\nPING\r\n")
	var zk []byte
	for _, size := range []int{40, 0, 12, 300} {
		zk = binary.BigEndian.AppendUint32(zk, uint32(size))
		zk = append(zk, make([]byte, size)...)
	}
	pgMsg := func(typ byte, body int) []byte {
		b := []byte{typ}
		b = binary.BigEndian.AppendUint32(b, uint32(4+body))
		return append(b, make([]byte, body)...)
	}
	var pg []byte
	pg = binary.BigEndian.AppendUint32(pg, 8) // SSLRequest
	pg = binary.BigEndian.AppendUint32(pg, pgSSLRequest)
	pg = binary.BigEndian.AppendUint32(pg, 8+20) // StartupMessage
	pg = binary.BigEndian.AppendUint32(pg, 196608)
	pg = append(pg, make([]byte, 20)...)
	for _, m := range [][]byte{pgMsg('Q', 9), pgMsg('P', 30), pgMsg('B', 12), pgMsg('E', 5), pgMsg('S', 0), pgMsg('X', 0)} {
		pg = append(pg, m...)
	}
	for _, tc := range []struct {
		name  string
		f     Framing
		input []byte
		want  int
	}{
		{"RESP", FramingRESP, resp, 4},
		{"ZooKeeper", FramingZooKeeper, zk, 4},
		{"PostgreSQL", FramingPostgres, pg, 2}, // the Query and the Sync
	} {
		t.Run(tc.name, func(t *testing.T) {
			for step := 1; step <= len(tc.input); step++ {
				if got := feedSplit(tc.f.newCounter(), tc.input, step); got != tc.want {
					t.Fatalf("written %d bytes at a time: %d requests counted; want %d", step, got, tc.want)
				}
			}
		})
	}
}
