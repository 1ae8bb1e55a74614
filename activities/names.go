package activities

import "github.com/idemhttp/temporal-idempotent-http/internal/request"

// ActivityName is the name the HTTP activity is registered under.
const ActivityName = request.ActivityName

// PollActivityName is the name the poll activity (Activities.Poll) is
// registered under.
const PollActivityName = request.PollActivityName
