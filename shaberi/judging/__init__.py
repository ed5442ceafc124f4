"""Judging: the judge stage, the prompt sets a judge may be given, the original Shaberi's replay, and the two-call
sequence (a reply, then a follow-up in the same conversation when it holds no verdict) that the judge stage and
``pairwise`` share (``exchange``)."""

from .stage import ANSWER_ERROR, Judge, JudgeConfig, JudgeProgress, judge, pending, rejudge_since, reprocess

__all__ = ["ANSWER_ERROR", "Judge", "JudgeConfig", "JudgeProgress", "judge", "pending", "rejudge_since", "reprocess"]
