"""Serving live responses: an event log with ids, resumable reads, a detached lifecycle, backends.

:class:`~pipeline.fanout.serving.memory.MemoryEventLog` is the default (embedded, no server);
:class:`~pipeline.fanout.serving.manager.ResponseManager` starts, stops and lists responses over any
:class:`~pipeline.fanout.serving._log.EventLog`.
"""
