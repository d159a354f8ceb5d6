package admin_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/celebrity-go/celebrity/admin"
	"github.com/celebrity-go/celebrity/l1cache"
)

func ExampleNew() {
	users, _ := l1cache.New(func(ctx context.Context, id string) (string, error) { return "user " + id, nil },
		l1cache.Options[string]{MaxEntries: 1000, Fresh: time.Second})
	defer users.Close()

	mux := http.NewServeMux()
	mux.Handle("/debug/celebrity/", http.StripPrefix("/debug/celebrity", admin.Must(admin.Options{
		Sections: map[string]admin.Section{"users": admin.Stats(users)},
	})))

	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest("GET", "/debug/celebrity/", nil))
	fmt.Println(rec.Code, rec.Body.String())
	// Output:
	// 200 {
	//   "actions": [],
	//   "sections": [
	//     "users"
	//   ]
	// }
}
