package chaos

import (
	"context"
	"fmt"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
)

// maxHistoryLines bounds a history's summary.
const maxHistoryLines = 60

// history summarises workflow id's history, one line per event with its
// time after the campaign's start, the worker of each activity attempt and
// each failure's message, so a finding can be matched with the faults.
func (c *campaign) history(ctx context.Context, id string) []string {
	var lines []string
	it := c.cl.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return append(lines, "history: "+err.Error())
		}
		if len(lines) == maxHistoryLines {
			lines = append(lines, "…")
		}
		if len(lines) > maxHistoryLines {
			continue
		}
		lines = append(lines, fmt.Sprintf("%6.1fs %s%s", ev.GetEventTime().AsTime().Sub(c.start).Seconds(), ev.GetEventType(), detail(ev)))
	}
	return lines
}

// detail is what of ev matters to a finding.
func detail(ev *historypb.HistoryEvent) string {
	switch {
	case ev.GetActivityTaskScheduledEventAttributes() != nil:
		a := ev.GetActivityTaskScheduledEventAttributes()
		return fmt.Sprintf(" %s on %s", a.GetActivityType().GetName(), a.GetTaskQueue().GetName())
	case ev.GetActivityTaskStartedEventAttributes() != nil:
		a := ev.GetActivityTaskStartedEventAttributes()
		return fmt.Sprintf(" by %s, attempt %d, last failure: %s", a.GetIdentity(), a.GetAttempt(), a.GetLastFailure().GetMessage())
	case ev.GetActivityTaskFailedEventAttributes() != nil:
		a := ev.GetActivityTaskFailedEventAttributes()
		return fmt.Sprintf(" by %s: %s (retry state %s)", a.GetIdentity(), a.GetFailure().GetMessage(), a.GetRetryState())
	case ev.GetActivityTaskTimedOutEventAttributes() != nil:
		a := ev.GetActivityTaskTimedOutEventAttributes()
		return fmt.Sprintf(": %s (retry state %s)", a.GetFailure().GetMessage(), a.GetRetryState())
	case ev.GetWorkflowExecutionFailedEventAttributes() != nil:
		return ": " + ev.GetWorkflowExecutionFailedEventAttributes().GetFailure().GetMessage()
	case ev.GetWorkflowTaskFailedEventAttributes() != nil:
		a := ev.GetWorkflowTaskFailedEventAttributes()
		return fmt.Sprintf(" by %s: %s", a.GetIdentity(), a.GetFailure().GetMessage())
	}
	return ""
}
