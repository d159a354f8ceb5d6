package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"time"
)

// client calls the service as its users do. Each call reports the status (0 when no reply
// came) and how long it took.
type client struct {
	base string
	http *http.Client
}

func newClient(base string) *client {
	return &client{base: base, http: &http.Client{Timeout: Deadline + 2*time.Second}}
}

type call struct {
	Status int
	Took   time.Duration
	Err    error
	proc   string // the process called, for the game day's report
}

func (c *client) do(ctx context.Context, method, path string, body []byte, out any) call {
	start := time.Now()
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, bytes.NewReader(body))
	if err != nil {
		return call{Err: err}
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return call{Took: time.Since(start), Err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	took := time.Since(start)
	if err == nil && out != nil && (resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusTooManyRequests) {
		err = json.Unmarshal(b, out)
	}
	return call{Status: resp.StatusCode, Took: took, Err: err}
}

func (c *client) getPost(ctx context.Context, id string) (Post, call) {
	var p Post
	return p, c.do(ctx, http.MethodGet, "/posts/"+id, nil, &p)
}

func (c *client) putPost(ctx context.Context, id, body string) (Post, call) {
	var p Post
	return p, c.do(ctx, http.MethodPut, "/posts/"+id, []byte(body), &p)
}

func (c *client) view(ctx context.Context, id, event string, at time.Time) (viewReply, call) {
	var v viewReply
	return v, c.do(ctx, http.MethodPost, "/posts/"+id+"/views?event="+event+"&at="+strconv.FormatInt(at.UnixMilli(), 10), nil, &v)
}

func (c *client) views(ctx context.Context, id string) (int64, call) {
	var v struct{ Views int64 }
	return v.Views, c.do(ctx, http.MethodGet, "/posts/"+id+"/views", nil, &v)
}

func (c *client) pay(ctx context.Context, merchant string) (payReply, call) {
	var p payReply
	return p, c.do(ctx, http.MethodPost, "/merchants/"+merchant+"/payments", nil, &p)
}

// maxAdmitted returns the most admissions (decision times in unix µs) in any window of one
// limit period that starts on a multiple of step: the figure a sliding-window limit bounds.
func maxAdmitted(at []int64, period, step time.Duration) (int, time.Time) {
	s := append([]int64(nil), at...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	best, when := 0, time.Time{}
	p, st := period.Microseconds(), step.Microseconds()
	j := 0
	for i := range s {
		start := s[i] - s[i]%st
		for j < len(s) && s[j] < start+p {
			j++
		}
		k := sort.Search(len(s), func(x int) bool { return s[x] >= start })
		if j-k > best {
			best, when = j-k, time.UnixMicro(start)
		}
	}
	return best, when
}

func check(ok bool, format string, a ...any) error {
	if ok {
		return nil
	}
	return fmt.Errorf(format, a...)
}
