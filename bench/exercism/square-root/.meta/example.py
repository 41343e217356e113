def square_root(number):
    n = 0
    while n ** 2 != number:
        n += 1
    return n
