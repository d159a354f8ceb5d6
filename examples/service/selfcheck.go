package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// selfCheck calls each endpoint of the service at base as a client would and checks the
// replies: posts read back at the version their PUT returned, every view counted once
// though each is sent twice, no payment denied under half the limit and none admitted over
// it, and the admin and metrics endpoints answering.
func selfCheck(ctx context.Context, base string) error {
	c := newClient(base)
	var errs []error
	fail := func(err error) { errs = append(errs, err) }
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	const posts = 20
	for i := range posts {
		id := fmt.Sprintf("%s-%d", run, i)
		p, r := c.putPost(ctx, id, "hello "+id)
		if r.Status != http.StatusOK {
			return fmt.Errorf("PUT /posts/%s: status %d %v", id, r.Status, r.Err)
		}
		for v := range 2 { // the second read comes from the cache; then one more write
			got, r := c.getPost(ctx, id)
			fail(check(r.Status == http.StatusOK && got == p, "GET /posts/%s after PUT returned version %d: %+v (status %d)", id, p.Version, got, r.Status))
			if v == 0 {
				continue
			}
			p2, r := c.putPost(ctx, id, "edited "+id)
			fail(check(r.Status == http.StatusOK && p2.Version == p.Version+1, "second PUT /posts/%s: %+v (status %d)", id, p2, r.Status))
			got, r = c.getPost(ctx, id)
			fail(check(r.Status == http.StatusOK && got == p2, "GET /posts/%s after the second PUT returned version %d: %+v", id, p2.Version, got))
		}
	}
	viewed := run + "-0"
	const events = 50
	applied := 0
	for i := range events {
		ev, at := fmt.Sprintf("%s-v%d", run, i), time.Now()
		for range 2 {
			v, r := c.view(ctx, viewed, ev, at)
			if r.Status != http.StatusOK {
				return fmt.Errorf("POST view: status %d %v", r.Status, r.Err)
			}
			if v.Applied {
				applied++
			}
		}
	}
	fail(check(applied == events, "%d views sent twice each: %d applied", events, applied))
	n, r := c.views(ctx, viewed)
	fail(check(r.Status == http.StatusOK && n == events, "GET views: %d (status %d), want %d", n, r.Status, events))

	// Payments: a quarter of the limit per second for one second, then as fast as it goes.
	merchant := run + "-m"
	var admitted []int64
	denied := 0
	pace := time.Second / time.Duration(MerchantLimit.Rate/4)
	for i := range 3 * MerchantLimit.Rate / 2 {
		if i < MerchantLimit.Rate/4 {
			time.Sleep(pace)
		}
		p, r := c.pay(ctx, merchant)
		switch {
		case r.Status == http.StatusOK:
			admitted = append(admitted, p.At)
		case r.Status == http.StatusTooManyRequests && i < MerchantLimit.Rate/4:
			denied++
		case r.Status != http.StatusTooManyRequests:
			return fmt.Errorf("POST payment: status %d %v", r.Status, r.Err)
		}
	}
	most, _ := maxAdmitted(admitted, MerchantLimit.Period, MerchantLimit.Period/10)
	fail(check(denied == 0, "%d payments denied at a quarter of the limit", denied))
	fail(check(most <= int(MerchantLimit.Rate), "%d payments admitted in one period, limit %d", most, MerchantLimit.Rate))

	for _, section := range []string{"posts", "views", "payments"} {
		var got map[string]any
		if r := c.do(ctx, http.MethodGet, "/admin/"+section, nil, &got); r.Status != http.StatusOK || len(got) == 0 {
			fail(fmt.Errorf("GET /admin/%s: status %d %v", section, r.Status, r.Err))
		}
	}
	fail(metricsServed(ctx, base))
	if err := errors.Join(errs...); err != nil {
		return err
	}
	fmt.Printf("self-check passed: %d posts written and read back, %d views counted once each, "+
		"0 of %d payments denied at 25%% of the limit, at most %d of %d admitted per period\n",
		posts, events, MerchantLimit.Rate/4, most, MerchantLimit.Rate)
	return nil
}

func metricsServed(ctx context.Context, base string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		b.WriteString(string(buf[:n]))
		if err != nil {
			break
		}
	}
	return check(resp.StatusCode == http.StatusOK && strings.Contains(b.String(), "celebrity_ratelimit_") &&
		strings.Contains(b.String(), "celebrity_cache_") && strings.Contains(b.String(), "celebrity_stripes_"),
		"GET /metrics: status %d without the components' metrics", resp.StatusCode)
}
