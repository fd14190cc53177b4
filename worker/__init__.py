"""The demo worker service: runs live distributed-training demos (all-reduce, pipeline, ZeRO...).

Not built yet: the demos issue adds the catalogue, runners and limits here.
"""
