"""Local servers that speak providers' real APIs, for the providers' real SDKs to talk to.

They stand in for the network edge only: our transport code runs unchanged against them.
"""
