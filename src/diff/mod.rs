//! Template and engine comparison: token-level and structural diffs of two renders of the same
//! request, schema loss under each, implied tool-call syntax. Pure.
